"""A seccomp-bpf filter, hand-assembled: no new sockets but TCP/UDP (when allowed), no io_uring.

Runs in the sandbox launcher (`tools/sandbox_launch.py`), standard library only. The filter:

- kills the process on a foreign syscall ABI (i386 `int 0x80` on x86_64 reaches `socketcall`,
  which this filter does not parse) and fails x32 syscalls with ENOSYS;
- `socket()`: EPERM for every family, except AF_INET / AF_INET6 when `allow_inet`. AF_UNIX is
  the point: connecting to a host socket (/var/run/docker.sock, an ssh-agent, D-Bus) needs no
  write permission, and read-only mounts do not stop it. Fds inherited from the caller (the
  execute_code socketpair) keep working: nothing here touches existing sockets;
- `socketpair()`: only SOCK_STREAM and SOCK_SEQPACKET. A datagram pair could `sendto()` any
  host datagram socket by path (/dev/log, journald, a systemd notify socket);
- `io_uring_setup`: EPERM, since io_uring can open sockets without calling `socket()`;
- `ioctl(TIOCSTI)` / `ioctl(TIOCLINUX)`: EPERM, so that a terminal on an inherited fd cannot
  be fed keystrokes (CVE-2017-5226; what bwrap's --new-session guards against, see sandbox.py);
- `keyctl` / `add_key` / `request_key`: EPERM; kernel keyrings are per user, not per sandbox;
- `setsid` / `setpgid`: EPERM when `pin_group`, so that every process stays in the caller's
  process group and one `killpg` ends them all (for tiers without a PID namespace).
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct

# BPF opcodes.
LD_W_ABS, ALU_AND_K = 0x20, 0x54
JEQ_K, JGE_K = 0x15, 0x35
RET_K = 0x06
RET_KILL_PROCESS, RET_ALLOW, RET_ERRNO = 0x80000000, 0x7FFF0000, 0x00050000
OFF_NR, OFF_ARCH, OFF_ARG0, OFF_ARG1 = 0, 4, 16, 24  # struct seccomp_data, little-endian

PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
AF_INET, AF_INET6 = 2, 10
SOCK_STREAM, SOCK_SEQPACKET, SOCK_TYPE_MASK = 1, 5, 0xF
X32_SYSCALL_BIT = 0x40000000
TIOCSTI, TIOCLINUX = 0x5412, 0x541C

ARCHES = {  # machine: (AUDIT_ARCH_*, syscall numbers)
    "x86_64": (0xC000003E, {
        "socket": 41, "socketpair": 53, "ioctl": 16, "setsid": 112, "setpgid": 109,
        "io_uring_setup": 425, "add_key": 248, "request_key": 249, "keyctl": 250}),
    "aarch64": (0xC00000B7, {
        "socket": 198, "socketpair": 199, "ioctl": 29, "setsid": 157, "setpgid": 154,
        "io_uring_setup": 425, "add_key": 217, "request_key": 218, "keyctl": 219}),
}


def supported() -> bool:
    """Whether this filter knows the machine's syscall ABI."""
    return os.uname().machine in ARCHES


def build(*, allow_inet: bool, pin_group: bool, machine: str | None = None) -> bytes:
    """The filter as `struct sock_filter[]` bytes."""
    machine = machine or os.uname().machine
    arch, nr = ARCHES[machine]
    deny = RET_ERRNO | errno.EPERM
    prog: list[tuple[int, str | None, str | None, int]] = []  # (code, jt label, jf label, k)
    labels: dict[str, int] = {}

    def op(code: int, k: int, jt: str | None = None, jf: str | None = None) -> None:
        prog.append((code, jt, jf, k))

    def label(name: str) -> None:
        labels[name] = len(prog)

    op(LD_W_ABS, OFF_ARCH)
    op(JEQ_K, arch, None, "kill")
    op(LD_W_ABS, OFF_NR)
    if machine == "x86_64":
        op(JGE_K, X32_SYSCALL_BIT, "enosys", None)
    op(JEQ_K, nr["socket"], "socket", None)
    op(JEQ_K, nr["socketpair"], "socketpair", None)
    op(JEQ_K, nr["ioctl"], "ioctl", None)
    for name in ("io_uring_setup", "add_key", "request_key", "keyctl"):
        op(JEQ_K, nr[name], "deny", None)
    if pin_group:
        op(JEQ_K, nr["setsid"], "deny", None)
        op(JEQ_K, nr["setpgid"], "deny", None)
    op(RET_K, RET_ALLOW)
    label("socket")
    op(LD_W_ABS, OFF_ARG0)
    if allow_inet:
        op(JEQ_K, AF_INET, "allow", None)
        op(JEQ_K, AF_INET6, "allow", None)
    op(RET_K, deny)
    label("socketpair")
    op(LD_W_ABS, OFF_ARG1)
    op(ALU_AND_K, SOCK_TYPE_MASK)
    op(JEQ_K, SOCK_STREAM, "allow", None)
    op(JEQ_K, SOCK_SEQPACKET, "allow", None)
    op(RET_K, deny)
    label("ioctl")
    op(LD_W_ABS, OFF_ARG1)
    op(JEQ_K, TIOCSTI, "deny", None)
    op(JEQ_K, TIOCLINUX, "deny", None)
    op(RET_K, RET_ALLOW)
    label("deny")
    op(RET_K, deny)
    label("enosys")
    op(RET_K, RET_ERRNO | errno.ENOSYS)
    label("kill")
    op(RET_K, RET_KILL_PROCESS)
    label("allow")  # last: BPF jumps only forward
    op(RET_K, RET_ALLOW)

    out = bytearray()
    for i, (code, jt, jf, k) in enumerate(prog):
        # Jumps are relative to the next instruction and forward only (u8).
        t = labels[jt] - i - 1 if jt else 0
        f = labels[jf] - i - 1 if jf else 0
        assert 0 <= t < 256 and 0 <= f < 256
        out += struct.pack("<HBBI", code, t, f, k)
    return bytes(out)


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(program: bytes) -> None:
    """Load `program` for this process and its future children (needs no_new_privs)."""
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _Fprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    zero = ctypes.c_ulong(0)
    if libc.prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER),
                  ctypes.byref(fprog), zero, zero) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_SECCOMP): {errno.errorcode.get(err, err)}")
