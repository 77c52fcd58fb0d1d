"""Make the wheelhouse Harbor installs Talaria from, offline, in a task's container.

    python3.12 editors/harbor/wheels.py dist/harbor-wheels             # for a Python 3.12 image
    python editors/harbor/wheels.py dist/harbor-wheels --python 3.12   # any Python: binary wheels only

OUT gets the wheel built from this checkout, every wheel it depends on, Harbor's ACP runner's
(`agent-client-protocol`) and pip's own (the container runs pip from that wheel, so the image
needs no pip), and `talaria-harbor.json`, which says for which Python they are. Run on the
host, where the package index is reachable; the container needs no network.

With the interpreter of the image's Python version (the default), `pip wheel` builds whatever
has no wheel; `--python X.Y` asks the index for binary wheels of that version and this
machine's platform instead. One line on stderr and exit 2 on failure; stdlib only.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = "talaria-harbor.json"
EXTRA = ("agent-client-protocol>=0.12", "pip")
"""Besides Talaria: Harbor's ACP runner imports `acp`; pip installs the rest."""
LEFT_OUT = (".git", ".venv*", ".typecheck", "build", "dist", "*.egg-info", "__pycache__",
            ".*cache*", "node_modules", ".npm")
"""Not copied to the build (setuptools would reuse a stale build/; the rest is weight)."""
TIMEOUT_S = 1800


class WheelError(Exception):
    """A step failed; the message is one line: what and why."""


def pip(*args: str | Path) -> None:
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", *map(str, args)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise WheelError(f"pip {args[0]} took over {TIMEOUT_S} s") from None
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        error = next((line for line in reversed(lines) if "ERROR" in line), lines[-1] if lines else "")
        raise WheelError(f"pip {args[0]} failed: {error.strip()}")


def build(out: Path, python: str | None) -> dict[str, str]:
    """Fill `out`; returns the manifest written there."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="talaria-wheel-") as tmp:
        source = Path(tmp) / "source"
        shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*LEFT_OUT))
        built = Path(tmp) / "built"
        pip("wheel", "--no-deps", "--wheel-dir", built, source)
        [wheel] = built.glob("talaria_agent-*.whl")
        shutil.copy2(wheel, out / wheel.name)
    target = out / wheel.name
    version = wheel.name.split("-")[1]
    mine = f"{sys.version_info.major}.{sys.version_info.minor}"
    if python in (None, mine):
        pip("wheel", "--wheel-dir", out, target, *EXTRA)
        python = mine
    else:
        pip("download", "--dest", out, "--only-binary=:all:", "--python-version", python,
            "--implementation", "cp", target, *EXTRA)
    manifest = {"talaria": version, "wheel": wheel.name, "python": python}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the wheelhouse directory (made if missing)")
    parser.add_argument("--python", metavar="X.Y",
                        help="the task image's Python (default: this interpreter's)")
    args = parser.parse_args(argv)
    if args.python is not None and not _version(args.python):
        print(f"wheels.py: --python takes a version like 3.12, not {args.python!r}", file=sys.stderr)
        return 2
    try:
        manifest = build(args.out, args.python)
    except WheelError as exc:
        print(f"wheels.py: {exc}", file=sys.stderr)
        return 2
    print(f"{args.out}: Talaria {manifest['talaria']} for Python {manifest['python']}")
    return 0


def _version(text: str) -> bool:
    major, _, minor = text.partition(".")
    return major == "3" and minor.isdigit() and int(minor) >= 11


if __name__ == "__main__":
    sys.exit(main())
