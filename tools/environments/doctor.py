"""`talaria env check [NAME]`: what works on this machine, one line per environment.

Each check is cheap and local where it can be (engine on PATH, image present, SDK importable,
credentials set); SSH actually connects (BatchMode, a short timeout), because reachability is
the question. A line starts with `ok` or `no`, then the environment, then the facts or the
cause and what to do.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from talaria.tools.environments.spec import EnvSpec, choices, resolve
from talaria.tools.errors import EnvError

SSH_CHECK_TIMEOUT_S = 15
"""`ConnectTimeout` plus the remote `python3 -V`."""


def check(spec: EnvSpec, cwd: Path) -> str:
    """What works for `spec`: `<facts>`; EnvError with the cause when it would not start."""
    if spec.backend == "local":
        return "this machine"
    if spec.backend == "docker":
        from talaria.tools.environments.docker import engine_run, find_engine

        engine = find_engine(spec.settings["engine"])
        image = spec.settings["image"]
        if engine_run([engine, "image", "inspect", image]).returncode != 0:
            raise EnvError(f"{Path(engine).name} found, but image {image!r} is not present "
                           f"(`{Path(engine).name} pull {image}` or build it)")
        version = engine_run([engine, "--version"]).stdout.strip()
        return f"{version or engine}, image {image} present"
    if spec.backend == "ssh":
        return _check_ssh(spec, cwd)
    if spec.backend == "singularity":
        from talaria.tools.environments.singularity import find_binary

        binary = find_binary(spec.settings["binary"])
        image = spec.settings["image"]
        if not image:
            raise EnvError(f"{Path(binary).name} found, but no image is set ([environments.singularity] image)")
        if "://" not in str(image) and not Path(str(image)).expanduser().exists():
            raise EnvError(f"{Path(binary).name} found, but image {image} does not exist")
        return f"{binary}, image {image}"
    from talaria.tools.environments.vendors import EXTRAS, check_credentials, sdk

    module = sdk(spec.backend)
    check_credentials(spec.backend)
    return f"SDK {EXTRAS[spec.backend][0]} {getattr(module, '__version__', '')}".rstrip() + \
        ", credentials set (not contacted)"


def _check_ssh(spec: EnvSpec, cwd: Path) -> str:
    from talaria.tools.environments.ssh import SshEnvironment

    env = SshEnvironment(spec, cwd=cwd, session_id="check", home=cwd)
    if env.ssh is None:
        raise EnvError("ssh (the OpenSSH client) is not installed")
    argv = [env.ssh, *env.ssh_options(), "-o", "ConnectTimeout=10", env.host,
            shlex.join(["python3", "-c", "import sys; print(sys.version.split()[0])"])]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=SSH_CHECK_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise EnvError(f"{env.host} did not answer within {SSH_CHECK_TIMEOUT_S} s") from None
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        raise EnvError(f"{env.host}: {lines[-1] if lines else f'ssh exited {done.returncode}'}")
    return f"{env.host} reachable, python {done.stdout.strip()}"


def report(names: list[str] | None, tables: Mapping[str, Any], cwd: Path) -> tuple[list[str], bool]:
    """(lines, all checked ok) for `names` (default: every known environment)."""
    lines, ok = [], True
    for name in names or choices(tables):
        try:
            facts = check(resolve(name, tables), cwd)
            lines.append(f"ok  {name}: {facts}")
        except EnvError as exc:
            ok = False
            lines.append(f"no  {name}: {exc}")
    return lines, ok
