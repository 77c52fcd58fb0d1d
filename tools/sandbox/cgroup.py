"""A pids cgroup per sandbox: bounds the process count where RLIMIT_NPROC does not (root).

Agent side. `create(limit)` makes `<our pids cgroup>/talaria-<agent pid>/<n>` with
`pids.max = limit` and returns its path, or None when this machine has no pids controller we
may write (then `tiers` warns). The sandbox launcher moves itself in before it starts the
command (`tools/sandbox/launch.py`), so every task the sandbox creates, threads included, is
counted, and fork fails with EAGAIN past the limit. `remove(path)` once the sandbox exited;
what dead agents left is removed by the next agent's first `create`.

cgroup v1 (a `pids` hierarchy) works as is. cgroup v2 works where `pids` can be enabled for
our subtree (root of the hierarchy, or a delegated subtree with no processes of its own in
the way); elsewhere `create` returns None.
"""

from __future__ import annotations

import atexit
import itertools
import os
from functools import cache

PREFIX = "talaria-"
_counter = itertools.count(1)
_pending: set[str] = set()
"""Cgroups whose rmdir failed (tasks still exiting): retried by later calls and at exit."""


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(mount root, mount point, fstype, super options) of every cgroup mount."""
    out: list[tuple[str, str, str, set[str]]] = []
    try:
        with open("/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            out.append((fields[3], fields[4], tail[0], set(tail[2].split(","))))
    return out


def _own_path(version: str) -> str | None:
    """This process's cgroup path in the pids hierarchy (v1) or the unified one (v2)."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if (version == "cgroup" and "pids" in controllers.split(",")) or \
                (version == "cgroup2" and controllers == ""):
            return path
    return None


def _join(mount_root: str, mount_point: str, path: str) -> str | None:
    if path != mount_root and not path.startswith(mount_root.rstrip("/") + "/"):
        return None  # our cgroup is not visible under this mount
    return os.path.join(mount_point, path[len(mount_root.rstrip("/")):].lstrip("/"))


@cache
def base() -> str | None:
    """`talaria-<pid>` under our own pids cgroup, created once; None when unusable."""
    for mount_root, point, fstype, options in _mounts():
        if fstype == "cgroup" and "pids" not in options:
            continue
        own = _own_path(fstype)
        directory = _join(mount_root, point, own) if own is not None else None
        if directory is None or not os.access(directory, os.W_OK):
            continue
        parent = os.path.join(directory, f"{PREFIX}{os.getpid()}")
        try:
            _prune(directory)
            os.makedirs(parent, exist_ok=True)
            if fstype == "cgroup2" and not _enable_pids(directory, parent):
                _rmdir(parent)
                continue
        except OSError:
            continue
        atexit.register(_cleanup, parent)
        return parent
    return None


def _enable_pids(directory: str, parent: str) -> bool:
    """v2: pids.max exists in a child only when the parent delegates `pids` to it."""
    try:
        for level in (directory, parent):
            with open(os.path.join(level, "cgroup.subtree_control")) as f:
                if "pids" not in f.read().split():
                    with open(os.path.join(level, "cgroup.subtree_control"), "w") as w:
                        w.write("+pids")
    except OSError:
        return False
    return True


def create(limit: int) -> str | None:
    """A fresh cgroup allowing `limit` tasks, or None."""
    parent = base()
    if parent is None:
        return None
    _retry()
    path = os.path.join(parent, str(next(_counter)))
    try:
        os.mkdir(path)
        with open(os.path.join(path, "pids.max"), "w") as f:
            f.write(str(limit))
    except OSError:
        _rmdir(path)
        return None
    return path


def remove(path: str) -> None:
    """Delete a sandbox's cgroup; if its tasks are still exiting, retry later."""
    if not _rmdir(path):
        _pending.add(path)


def _rmdir(path: str) -> bool:
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _retry() -> None:
    for path in list(_pending):
        if _rmdir(path):
            _pending.discard(path)


def _cleanup(parent: str) -> None:
    _retry()
    _prune(os.path.dirname(parent), include=parent)


def _prune(directory: str, include: str | None = None) -> None:
    """Remove empty `talaria-<pid>` cgroups of agents that are gone (or `include`)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        path = os.path.join(directory, name)
        pid = name[len(PREFIX):]
        if not name.startswith(PREFIX) or not pid.isdigit():
            continue
        if path != include:
            try:
                os.kill(int(pid), 0)
                continue  # that agent still runs
            except ProcessLookupError:
                pass
            except OSError:
                continue
        try:
            children = [c for c in os.listdir(path) if c.isdigit()]
        except OSError:
            continue
        for child in children:
            _rmdir(os.path.join(path, child))
        _rmdir(path)
