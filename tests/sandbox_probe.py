"""Attacks run inside the sandbox by tests/test_sandbox.py. Standard library only.

`python sandbox_probe.py CHECK[=ARG] ...` runs each check in order and prints one JSON line per
check: {"check": "CHECK[=ARG]", "ok": true} when the operation succeeded, else {"ok": false,
"error": "EACCES ..."}. Some checks never return (spin, sleep) or print extra fields (fork: "forked").
A `tag=...` argument does nothing: it marks the command line so the test can find the processes.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import socket
import sys
import tempfile
import time


def write(path: str) -> dict:
    with open(path, "w") as f:
        f.write("probe\n")
    return {}


def read(path: str) -> dict:
    with open(path) as f:
        return {"text": f.read(100)}


def tcp(address: str) -> dict:
    host, port = address.rsplit(":", 1)
    socket.create_connection((host, int(port)), timeout=2).close()
    return {}


def unix(path: str) -> dict:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(2)
        s.connect(path)
    return {}


def abstract(name: str) -> dict:
    return unix("\0" + name)


def dgram_pair(_: str) -> dict:
    for s in socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM):
        s.close()
    return {}


def echo(fd: str) -> dict:
    """Read a line from the inherited socket and send it back."""
    with socket.socket(fileno=int(fd)) as s:
        line = s.makefile("rb").readline()
        s.sendall(line)
    return {"line": line.decode()}


def signal0(pid: str) -> dict:
    os.kill(int(pid), 0)
    return {}


def caps(_: str) -> dict:
    with open("/proc/self/status") as f:
        eff = next(line.split()[1] for line in f if line.startswith("CapEff:"))
    if int(eff, 16) == 0:
        raise PermissionError(errno.EPERM, "no capabilities")
    return {"caps": eff}


def sysctl_write(_: str) -> dict:
    """Open core_pattern for writing; nothing is written."""
    os.close(os.open("/proc/sys/kernel/core_pattern", os.O_WRONLY))
    return {}


def remount(_: str) -> dict:
    """Make / writable, in a child with its own mount namespace: never the host's mount,
    even where this succeeds (rlimits tier, as root)."""
    libc = ctypes.CDLL(None, use_errno=True)
    clone_newns, clone_newuser, ms_remount, ms_bind = 0x20000, 0x10000000, 32, 4096
    pid = os.fork()
    if pid == 0:
        if libc.unshare(clone_newns) != 0 and libc.unshare(clone_newns | clone_newuser) != 0:
            os._exit(2)
        flags = ctypes.c_ulong(ms_remount | ms_bind)
        os._exit(0 if libc.mount(None, b"/", None, flags, None) == 0 else 1)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise PermissionError(errno.EPERM, "unshare failed" if code == 2 else "mount failed")
    return {}


def tiocsti(_: str) -> dict:
    """Push a character into the terminal on stdin (the test gives it a pty)."""
    import fcntl
    import termios

    fcntl.ioctl(0, termios.TIOCSTI, b"\n")
    return {}


def setsid(_: str) -> dict:
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
        except OSError:
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise PermissionError(errno.EPERM, "setsid failed")
    return {}


def tmpfile(_: str) -> dict:
    with tempfile.NamedTemporaryFile() as f:
        f.write(b"x")
        return {"path": f.name}


def fork(count: str) -> dict:
    """Fork up to `count` children that sleep; report how many forks succeeded."""
    forked, stopped = 0, None
    for _ in range(int(count)):
        try:
            pid = os.fork()
        except OSError as exc:
            stopped = errno.errorcode.get(exc.errno or 0, str(exc))
            break
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        forked += 1
    return {"forked": forked, "stopped_by": stopped}


def escape(seconds: str) -> dict:
    """Fork a child that leaves the process group (setsid, if allowed) and sleeps."""
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        with contextlib.suppress(OSError):  # denied in the landlock tier
            os.setsid()
        os.write(done_w, b"x")
        time.sleep(float(seconds))
        os._exit(0)
    os.read(done_r, 1)  # report only once the child has tried
    return {"pid": pid}


def alloc(size: str) -> dict:
    data = bytearray(int(size))
    return {"len": len(data)}


def spin(_: str) -> dict:
    while True:
        pass


def spew(size: str) -> dict:
    chunk = b"x" * (1 << 20)
    left = int(size)
    out = sys.stdout.buffer
    while left > 0:
        out.write(chunk[:left])
        left -= len(chunk)
    out.flush()
    return {}


def bigfile(arg: str) -> dict:
    path, size = arg.rsplit(":", 1)
    with open(path, "wb") as f:
        f.write(b"x" * int(size))
    return {}


def tmpfill(arg: str) -> dict:
    """`DIR:N:SIZE`: write N files of SIZE bytes in DIR (`TMPDIR`: the env's) in 1 MiB
    writes; reports how much got written and the error that stopped it."""
    directory, count, size = arg.rsplit(":", 2)
    directory = os.environ["TMPDIR"] if directory == "TMPDIR" else directory
    chunk, written = b"x" * (1 << 20), 0
    try:
        for n in range(int(count)):
            with open(os.path.join(directory, f"fill{n}"), "wb") as f:
                left = int(size)
                while left > 0:
                    written += f.write(chunk[:left])
                    left -= len(chunk)
    except OSError as exc:
        return {"written": written, "error": errno.errorcode.get(exc.errno or 0, str(exc))}
    return {"written": written, "tmpdir": directory}


def sleep(seconds: str) -> dict:
    time.sleep(float(seconds))
    return {}


def tag(_: str) -> dict:
    return {}


CHECKS = {f.__name__: f for f in (write, read, tcp, unix, abstract, dgram_pair, echo, caps,
                                  sysctl_write, remount, tiocsti, setsid, tmpfile, fork, escape, alloc, spin,
                                  spew, bigfile, tmpfill, sleep, tag)}
CHECKS["signal"] = signal0


def main(args: list[str]) -> None:
    for arg in args:
        name, _, value = arg.partition("=")
        try:
            result = {"check": arg, "ok": True, **CHECKS[name](value)}
        except (OSError, MemoryError) as exc:
            code = errno.errorcode.get(getattr(exc, "errno", None) or 0, type(exc).__name__)
            result = {"check": arg, "ok": False, "error": f"{code} {exc}"}
        if name != "tag":
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
