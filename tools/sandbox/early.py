"""The sandbox launcher's first step, taken before its imports: join the pids cgroup.

Imported by `tiers.BOOT` ahead of `launch`. Moving a process into a cgroup (v1) waits for an
RCU grace period: 9-18 ms here, as long as the launcher's imports. So the move runs in a
thread from the start, and `launch.confine` waits for it (`joined`) before it starts the
command. Standard library only; no import that costs anything.
"""

from __future__ import annotations

import _thread
import os
import sys

PREFIX = '{"cgroup": "'
"""`tiers.prepare` puts the cgroup first in the config, so it is found without parsing JSON."""

_done = _thread.allocate_lock()
_path: str | None = None
_error: OSError | None = None


def _move(path: str) -> None:
    global _error
    try:
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    except OSError as exc:
        _error = exc
    finally:
        _done.release()


def start(argv: list[str]) -> None:
    """Begin the move if the config names a cgroup and we are root (else RLIMIT_NPROC)."""
    global _path
    config = argv[1] if len(argv) > 1 else ""
    end = config.find('"', len(PREFIX))
    if os.geteuid() != 0 or not config.startswith(PREFIX) or end < 0 or "\\" in config[:end]:
        return  # no cgroup, or an escaped path: `launch` joins it after parsing the config
    _path = config[len(PREFIX):end]
    _done.acquire()
    _thread.start_new_thread(_move, (_path,))


def joined(path: str) -> bool:
    """Whether the early move into `path` happened (waits for it); raises its error."""
    if _path != path:
        return False
    with _done:
        pass
    if _error is not None:
        raise _error
    return True


start(sys.argv)
