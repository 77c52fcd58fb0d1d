"""Hermes Agent side by side: run Hermes' own functions in its own interpreter, in the same run.

Set `TALARIA_BENCH_HERMES` to a Hermes Agent checkout (or an unpacked release) and, when its
dependencies live elsewhere, `TALARIA_BENCH_HERMES_PYTHON` to an interpreter that has them
(default: `<checkout>/../venv-hermes/bin/python` when it exists, else this interpreter).
Without the variable a benchmark reports Talaria's figures only. Nothing of Hermes is copied
here: a benchmark hands `HermesProcess` a driver (our code, calling Hermes' functions), which
runs in a child with the checkout first on `sys.path`, `HERMES_HOME` in a temporary folder,
and answers one JSON line per request. Any network use points at loopback (the driver's
caller passes a canned endpoint), never elsewhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

_LOOP = """
import json, sys, time, traceback
sys.path.insert(0, sys.argv[1])
{driver}
for line in sys.stdin:
    request = json.loads(line)
    try:
        answer = {{"ok": OPS[request.pop("op")](**request)}}
    except Exception:
        answer = {{"error": traceback.format_exc()[-2000:]}}
    print(json.dumps(answer), flush=True)
"""


def checkout() -> Path | None:
    """The Hermes checkout named by TALARIA_BENCH_HERMES, or None (Talaria's figures only)."""
    named = os.environ.get("TALARIA_BENCH_HERMES")
    return Path(named) if named else None


def interpreter(root: Path) -> str:
    named = os.environ.get("TALARIA_BENCH_HERMES_PYTHON")
    if named:
        return named
    beside = root.parent / "venv-hermes" / "bin" / "python"
    return str(beside) if beside.exists() else sys.executable


def version(root: Path) -> str:
    for meta in root.glob("hermes_agent-*.dist-info/METADATA"):
        for line in meta.read_text().splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    return "checkout"


class HermesProcess:
    """A child interpreter running `driver` (Python source defining `OPS`, a dict of name →
    function) against the Hermes checkout; `call(op, **kwargs)` returns the function's value."""

    def __init__(self, root: Path, driver: str, *, cwd: Path | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.home = tempfile.TemporaryDirectory(prefix="hermes-home-")
        # No lazy pip installs mid-benchmark (Hermes 0.19 tries one for each missing extra).
        full_env = {**os.environ, "HERMES_HOME": self.home.name,
                    "HERMES_DISABLE_LAZY_INSTALLS": "1", **(env or {})}
        self.proc = subprocess.Popen(
            [interpreter(root), "-c", _LOOP.format(driver=driver), str(root)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=cwd, env=full_env, text=True)

    def call(self, op: str, **kwargs: Any) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"op": op, **kwargs}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the Hermes driver exited ({self.proc.wait()}) during {op}")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"Hermes {op} failed:\n{answer['error']}")
        return answer["ok"]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.home.cleanup()

    def __enter__(self) -> HermesProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
