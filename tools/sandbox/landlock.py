"""Landlock through ctypes: read everywhere but hidden paths, write only where allowed.

Runs in the sandbox launcher (`tools/sandbox_launch.py`), standard library only. Landlock is an
allow-list: a rule grants rights on a directory and everything beneath it, and nothing can be
taken away from a subtree once granted. So "read everything except ~/.ssh" is built as read
rights on every sibling along the path to each hidden entry (`readable_except`); listing names
(READ_DIR from `/`) stays allowed everywhere, reading contents does not.
"""

from __future__ import annotations

import ctypes
import os
import stat
from collections.abc import Iterable

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # same on every arch
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK = 1 << 8, 1 << 9, 1 << 10, 1 << 11
MAKE_SYM, REFER, TRUNCATE = 1 << 12, 1 << 13, 1 << 14  # REFER: ABI 2, TRUNCATE: ABI 3
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

READ = EXECUTE | READ_FILE | READ_DIR
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE
"""The only rights a rule on a non-directory may carry."""
# IOCTL_DEV (ABI 5) stays unhandled: it would only restrict ioctls on devices opened later.


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _syscall(*args: object) -> int:
    return _libc.syscall(*(ctypes.c_long(a) if isinstance(a, int) else a for a in args))


def prctl(option: int, arg2: int = 0, arg3: int = 0) -> int:
    """prctl(2) with unsigned long arguments, raising OSError."""
    zero = ctypes.c_ulong(0)
    return _check(_libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(arg3),
                              zero, zero), f"prctl({option})")


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def abi_version() -> int:
    """Landlock ABI of the running kernel, 0 when Landlock is missing or disabled."""
    try:
        version = _syscall(SYS_CREATE_RULESET, None, 0, CREATE_RULESET_VERSION)
    except (AttributeError, OSError):
        return 0
    return max(0, int(version))


def all_fs_rights(abi: int) -> int:
    """Every filesystem right this ABI knows (minus IOCTL_DEV): what a writable dir gets."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    return rights


def readable_except(hidden: Iterable[str], root: str = "/") -> list[str]:
    """Paths whose read rules together cover everything under `root` except `hidden`.

    Walks only the directories that lead to a hidden path; symlinks are skipped (access
    through them is checked on their target, which has its own rule or none).
    """
    hidden = {os.path.normpath(h) for h in hidden}
    if not hidden:
        return [root]
    granted: list[str] = []

    def walk(directory: str) -> None:
        try:
            entries = list(os.scandir(directory))
        except OSError:  # unreadable anyway
            return
        for entry in entries:
            path = entry.path
            if path in hidden or entry.is_symlink():
                continue
            if any(h.startswith(path.rstrip("/") + "/") for h in hidden):
                if entry.is_dir(follow_symlinks=False):
                    walk(path)
            else:
                granted.append(path)

    walk(root)
    return granted


def restrict_self(rules: Iterable[tuple[str, int]], *, abi: int, deny_tcp: bool,
                  scope: bool = True) -> None:
    """Confine this process and its future children to `rules` ((path, rights) pairs).

    `deny_tcp` handles TCP bind/connect with no rule (ABI >= 4), i.e. forbids both; `scope`
    (ABI >= 6) forbids connecting to abstract Unix sockets and signalling processes outside
    the sandbox. Paths that cannot be opened are skipped. Sets no_new_privs.
    """
    handled = all_fs_rights(abi)
    attr = _RulesetAttr(handled, 0, 0)
    size = 8
    if abi >= 4:
        attr.net = (NET_BIND_TCP | NET_CONNECT_TCP) if deny_tcp else 0
        size = 16
    if abi >= 6:
        attr.scoped = (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if scope else 0
        size = 24
    ruleset = _check(_syscall(SYS_CREATE_RULESET, ctypes.byref(attr), size, 0),
                     "landlock_create_ruleset")
    try:
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    rights &= FILE_RIGHTS
                rule = _PathBeneath(rights & handled, fd)
                _check(_syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0),
                       f"landlock_add_rule {path}")
            finally:
                os.close(fd)
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        _check(_syscall(SYS_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)
