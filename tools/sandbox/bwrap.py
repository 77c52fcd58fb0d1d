"""bubblewrap's command line: the mounts that confine a command (tmpfs, binds, hidden paths,
read-only protection of rejected paths inside writable dirs)."""

from __future__ import annotations

import itertools
import os
import shutil

from talaria.tools.errors import SandboxError

BWRAP_NAMESPACES = ("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")
MAX_SEALED_ENTRIES = 4096
"""Entries a directory may hold when a rejected path that does not exist yet sits in it (each
is bound back writable)."""


def within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")




def protect_mounts(readonly: list[str], writable: list[str],
                    hidden: list[str]) -> list[tuple[str, list[str]]]:
    """bwrap mounts that keep each `readonly` path (inside a writable dir) as it is.

    An existing path is bound read-only onto itself: writes fail with EROFS, and a mount
    point cannot be removed or renamed over (EBUSY), so `mv x .env`, `ln -sf`, `sed -i` and
    `rm` fail too. Its directories up to the writable dir are bound onto themselves, so none
    of them can be renamed away and recreated. A path that does not exist yet cannot be
    mounted: its nearest existing directory turns read-only (no new entries) and each entry
    already in it is bound back writable.
    """
    frozen: set[str] = set()
    sealed: set[str] = set()
    pinned: set[str] = set()
    for path in readonly:
        base = next(w for w in writable if within(path, w))
        target = path
        while not os.path.lexists(target):
            target = os.path.dirname(target)
        (frozen if target == path else sealed).add(target)
        parent = os.path.dirname(target)
        while within(parent, base) and parent != base:
            pinned.add(parent)
            parent = os.path.dirname(parent)
    reopened = set()
    for directory in sealed:
        with os.scandir(directory) as entries:
            found = list(itertools.islice(entries, MAX_SEALED_ENTRIES + 1))
        if len(found) > MAX_SEALED_ENTRIES:
            raise SandboxError(f"{directory} has more than {MAX_SEALED_ENTRIES} entries: too "
                               f"many to keep a rejected path in it from being created")
        reopened |= {e.path for e in found if not e.is_symlink() and e.path not in hidden}
    mounts = []
    for path in sorted((pinned | reopened) - frozen - sealed):
        if not any(within(path, f) for f in frozen):
            mounts.append((path, ["--bind", path, path]))
    mounts += [(path, ["--ro-bind", path, path]) for path in sorted(frozen | sealed)]
    return mounts



def bwrap_args(network: bool, tmp_bytes: int | None, writable: list[str], hidden: list[str],
               exposed: list[str], tmpdir: str | None,
               protect: list[tuple[str, list[str]]], *, die_with_parent: bool = True) -> list[str]:
    """bwrap options; mounts sorted by depth so that nested mounts land on top of outer ones
    (a hidden dir inside the project, a writable staging dir under /tmp or a hidden dir)."""
    size = ["--size", str(tmp_bytes)] if tmp_bytes is not None else []
    mounts: list[tuple[str, list[str]]] = [("/tmp", [*size, "--tmpfs", "/tmp"])]
    if tmpdir and tmpdir != "/tmp":
        mounts.append((tmpdir, [*size, "--tmpfs", tmpdir]))
    mounts += [(w, ["--bind", w, w]) for w in writable]
    seal = []  # read-only once the mount points of nested writable dirs exist in them
    for h in hidden:
        if os.path.isdir(h):
            mounts.append((h, ["--tmpfs", h]))
            seal += ["--remount-ro", h]
        else:
            mounts.append((h, ["--ro-bind", "/dev/null", h]))
    mounts += [(path, ["--ro-bind", path, path]) for path in exposed]
    mounts += protect
    mounts.sort(key=lambda m: m[0].rstrip("/").count("/"))
    args = [shutil.which("bwrap") or "bwrap", "--ro-bind", "/", "/", "--dev", "/dev",
            "--proc", "/proc"]
    for _, options in mounts:
        args += options
    args += seal
    args += BWRAP_NAMESPACES
    if not network:
        args.append("--unshare-net")
    return [*args, "--die-with-parent"] if die_with_parent else args
