"""Where and with what an `execute_code` kernel runs: settings, limits, environment, interpreter.

`project` mode runs in the session's cwd, which the script may write with the session's
additional directories (like a `terminal` command: execute_code asks permission as one), with the project's interpreter (`VIRTUAL_ENV` or
`CONDA_PREFIX` python when it is >= 3.8, else Talaria's own). `strict` mode runs in a fresh
staging directory, the only place it may write, with Talaria's own interpreter. Both get a
scratch directory as TMPDIR.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

MODES = ("project", "strict")
TIMEOUT_S = 300.0
"""Wall-clock limit of one execute_code call; then SIGTERM to the kernel's process group."""
KILL_GRACE_S = 5.0
"""Between SIGTERM and SIGKILL of a timed-out kernel's process group."""
STDOUT_LIMIT = 50_000
"""Bytes of stdout returned inline: the first 40 % and the last 60 %, the rest spilled."""
STDERR_LIMIT = 10_000
"""Bytes of stderr returned when the script fails."""
SPILL_LIMIT = 64 * 1024 * 1024
"""Bytes of stdout saved to the spill file; beyond it bytes are only counted."""
MAX_TOOL_CALLS = 50
"""Tool calls per execution; later calls get an error the script can see."""
IDLE_S = 1800.0
"""A kernel unused this long is stopped (by the pool, and by the kernel itself)."""
MAX_KERNELS = 4
"""Live kernels per pool; starting one more stops the least recently used."""
MIN_PYTHON = (3, 8)

SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH",
                  "COOKIE", "SESSION", "PRIVATE")
ESSENTIAL_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TERM",
                 "TZ", "TMPDIR", "XDG_*", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV",
                 "PYTHONPATH", "PYTHONHASHSEED", "NO_COLOR", "COLUMNS", "LINES")


@dataclass(frozen=True, slots=True)
class ExecSettings:
    """One session's execute_code settings; front doors build it from `Config`."""

    mode: str = MODES[0]
    """project (session cwd, project's python) or strict (staging dir, Talaria's python)."""
    timeout: float = TIMEOUT_S
    kill_grace: float = KILL_GRACE_S
    stdout_limit: int = STDOUT_LIMIT
    stderr_limit: int = STDERR_LIMIT
    max_tool_calls: int = MAX_TOOL_CALLS
    idle_s: float = IDLE_S
    max_kernels: int = MAX_KERNELS
    env_passthrough: tuple[str, ...] = ()
    """Extra variable names (or globs) scripts may see, secrets included: the user's choice."""
    cache_dir: Path | None = None
    """Spilled output and scratch dirs; default `$TALARIA_HOME/cache/exec`."""
    tier: str | None = None
    """Sandbox tier override (bubblewrap, landlock, rlimits); None detects the best."""
    readonly: tuple[Path, ...] = ()
    """Paths the script may not change (edits the user rejected), when it runs unasked."""
    hidden: tuple[Path, ...] = ()
    """More paths to hide (`sensitive_paths`), when it runs unasked."""
    tmp_bytes: int | None = None
    """Bound on the kernel's temporary files (TMPDIR); None: the sandbox's `Limits.tmp_bytes`."""
    roots: tuple[Path, ...] = ()
    """More directories a `project` script may write besides its cwd: the session's
    additional directories (`runtime.Opening.additional_dirs`)."""

    def cache(self) -> Path:
        if self.cache_dir is not None:
            return self.cache_dir
        from talaria.tools.home import talaria_home

        return talaria_home() / "cache" / "exec"


def looks_secret(name: str) -> bool:
    upper = name.upper()
    return any(marker in upper for marker in SECRET_MARKERS)


def scrub_env(env: Mapping[str, str], passthrough: tuple[str, ...] = ()) -> dict[str, str]:
    """Essentials that don't look like secrets, plus whatever `passthrough` names explicitly."""
    def matches(name: str, patterns: tuple[str, ...]) -> bool:
        return any(fnmatch.fnmatchcase(name, p) for p in patterns)

    return {
        name: value for name, value in env.items()
        if matches(name, passthrough) or (matches(name, ESSENTIAL_ENV) and not looks_secret(name))
    }


def interpreter(mode: str, env: Mapping[str, str]) -> tuple[str, list[str]]:
    """(python executable, warnings) for a kernel in `mode`."""
    if mode == "strict":
        return sys.executable, []
    warnings = []
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        prefix = env.get(var)
        if not prefix:
            continue
        python = Path(prefix) / "bin" / "python"
        version = python_version(str(python))
        if version is None:
            warnings.append(f"${var} has no usable python at {python}; using Talaria's own")
        elif version < MIN_PYTHON:
            warnings.append(f"{python} is Python {version[0]}.{version[1]} (< 3.8); using Talaria's own")
        else:
            return str(python), warnings
    return sys.executable, warnings


def python_version(python: str) -> tuple[int, int] | None:
    """The (major, minor) of an interpreter, or None when it is missing or broken."""
    try:
        mtime = os.stat(python).st_mtime
    except OSError:
        return None
    return _probe(python, mtime)


@functools.lru_cache(maxsize=16)
def _probe(python: str, mtime: float) -> tuple[int, int] | None:
    # pyvenv.cfg answers without starting a process (cold start budget: 80 ms).
    cfg = Path(python).parent.parent / "pyvenv.cfg"
    try:
        for line in cfg.read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition("=")
            if key.strip() in ("version", "version_info"):
                major, minor = value.strip().split(".")[:2]
                return int(major), int(minor)
    except (OSError, ValueError):
        pass
    import subprocess  # rarely needed (no pyvenv.cfg): not on `talaria acp`'s start-up path

    try:
        out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
        major, minor = out.split()
        return int(major), int(minor)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
