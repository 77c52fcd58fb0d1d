"""The sandbox's first program: confine itself, then run the command.

Run as `python -I -S sandbox_launch.py CONFIG_JSON -- ARGV...` (built by `talaria.tools.sandbox.tiers.prepare`;
inside bwrap in the bubblewrap tier). Standard library only. In order: parent-death signal,
resource limits, (bubblewrap, as root) a per-namespace `pid_max` and a read-only /proc/sys, TMPDIR,
no_new_privs, (as root) an empty capability bounding set, Landlock, seccomp. Doing this here
rather than in a `preexec_fn` keeps the caller's fork async-signal-safe (the agent has threads),
lets callers use `anyio.open_process`, and leaves bwrap itself unfiltered.

Then, in bwrap, it execs the command (bwrap's PID namespace ends everything with it). Without a
PID namespace a parent-death signal would kill only the command, not what the command started:
so there the launcher stays as a small supervisor that forks the command, forwards signals and
the exit status, and SIGKILLs its whole process group when the caller dies.

Any failure exits with `FAILED` (125) and one line on stderr: the sandbox fails closed.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import resource
import runpy
import signal
import sys

# Run as a script with -I -S (no site, so no installed or editable `talaria`): its two
# helpers are imported from this folder, and they import nothing but the standard library.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import landlock  # noqa: E402
import seccomp  # noqa: E402

FAILED = 125
PARENT_DIED = signal.SIGRTMIN + 1
"""The supervisor's parent-death signal (not SIGKILL: it must act on it)."""
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
             signal.SIGUSR2)
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 1, 24, 47, 4
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC = 32, 4096, 16384
PID_MAX_MIN = 301
"""The kernel's floor for pid_max (RESERVED_PIDS + 1)."""
SYS_CAPSET = {"x86_64": 126, "aarch64": 91}
CAP_VERSION_3 = 0x20080522
DEVICES = ("/dev/null", "/dev/zero", "/dev/full")
"""Landlock: device files the sandbox may open for writing."""


def set_limits(limits: dict[str, int]) -> None:
    """RLIMIT_* from `Limits`; hard = soft, so the sandbox cannot raise them again."""
    processes = limits["processes"]
    if os.geteuid() != 0:
        # RLIMIT_NPROC counts every task of this uid (in this user namespace), not ours only:
        # a desktop session has thousands of threads. Allow `processes` more than exist now.
        processes += count_tasks(os.getuid())
    pairs = [
        (resource.RLIMIT_AS, limits["memory_bytes"], limits["memory_bytes"]),
        # SIGXCPU at the soft limit, SIGKILL a second later if that is caught.
        (resource.RLIMIT_CPU, limits["cpu_seconds"], limits["cpu_seconds"] + 1),
        (resource.RLIMIT_FSIZE, limits["file_size_bytes"], limits["file_size_bytes"]),
        (resource.RLIMIT_NOFILE, limits["open_files"], limits["open_files"]),
        (resource.RLIMIT_NPROC, processes, processes),
        (resource.RLIMIT_CORE, 0, 0),
    ]
    for which, soft, hard in pairs:
        _, old_hard = resource.getrlimit(which)
        if old_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, old_hard), min(hard, old_hard)
        resource.setrlimit(which, (soft, hard))


def count_tasks(uid: int) -> int:
    """Threads of all processes of `uid` visible in /proc."""
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    count += len(os.listdir(f"/proc/{name}/task"))
            except OSError:  # gone meanwhile
                pass
    return count


def seal_pid_namespace(processes: int) -> None:
    """Root in bwrap: RLIMIT_NPROC does not apply to uid 0, but since Linux 6.14 each PID
    namespace has its own pid_max, which bounds how many tasks can exist in it. Then make
    /proc/sys read-only: uid 0 may write most sysctls without any capability (core_pattern
    would run a program on the host), and bwrap leaves /proc/sys writable for root."""
    try:
        with open("/proc/sys/kernel/pid_max", "w") as f:
            f.write(str(max(PID_MAX_MIN, processes)))
    except OSError:  # older kernel: one global pid_max
        pass
    libc = ctypes.CDLL(None, use_errno=True)
    flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
    for source, target, mount_flags in ((b"/proc/sys", b"/proc/sys", MS_BIND | MS_REC),
                                        (None, b"/proc/sys", flags)):
        if libc.mount(source, target, None, ctypes.c_ulong(mount_flags), None) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"read-only /proc/sys: {os.strerror(err)}")


def drop_capabilities() -> None:
    """Root keeps its uid but holds no capability, now or after exec: empty bounding and
    ambient sets (the kernel gives root the bounding set on exec), then empty own sets (the
    supervisor keeps running). No mounts, modules, raw I/O, ptrace..."""
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        landlock.prctl(PR_CAPBSET_DROP, cap)
    landlock.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    nr = SYS_CAPSET.get(platform.machine())
    if nr is not None:
        header = (ctypes.c_uint32 * 2)(CAP_VERSION_3, 0)
        data = (ctypes.c_uint32 * 6)()  # two {effective, permitted, inheritable}, all empty
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syscall(ctypes.c_long(nr), header, data) != 0:
            raise OSError(ctypes.get_errno(), "capset")


def confine(config: dict) -> None:
    tier = config["tier"]
    if tier != "bubblewrap":  # bwrap --die-with-parent does it there
        landlock.prctl(PR_SET_PDEATHSIG, PARENT_DIED)
        if config.get("parent") and os.getppid() != config["parent"]:
            raise OSError("the caller exited before the sandbox started")
    set_limits(config["limits"])
    root = os.geteuid() == 0
    if tier == "bubblewrap" and root:
        seal_pid_namespace(config["limits"]["processes"])
    tmpdir = config.get("tmpdir")
    current = os.environ.get("TMPDIR", "")
    if tmpdir and not (current and any(_within(current, d) for d in config["writable"])):
        os.environ["TMPDIR"] = tmpdir
    if tier == "rlimits":
        return
    landlock.prctl(landlock.PR_SET_NO_NEW_PRIVS, 1)
    if root:
        drop_capabilities()
    if tier == "landlock":
        abi = landlock.abi_version()
        writable = [*config["writable"], *([tmpdir] if tmpdir else [])]
        rules = [("/", landlock.READ_DIR)]
        readable = [*landlock.readable_except(config["hidden"]), *config["readable"]]
        rules += [(p, landlock.READ) for p in readable]
        # A hidden or read-only path inside a writable dir: write rights go to everything
        # around it instead of to the dir (a Landlock grant cannot be taken back below).
        protected = [*config["hidden"], *config.get("readonly", ())]
        for w in writable:
            inner = [p for p in protected if p != w and _within(p, w)]
            rules += [(p, landlock.all_fs_rights(abi))
                      for p in landlock.readable_except(inner, root=w)]
        rules += [(p, landlock.READ_FILE | landlock.WRITE_FILE | landlock.TRUNCATE)
                  for p in DEVICES]
        landlock.restrict_self(rules, abi=abi, deny_tcp=not config["network"])
    if seccomp.supported():
        # bubblewrap: a private network namespace unless `network`, so TCP/UDP stay inside it.
        allow_inet = config["network"] or tier == "bubblewrap"
        seccomp.install(seccomp.build(allow_inet=allow_inet, pin_group=tier == "landlock"))


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def same_python(command: list[str]) -> bool:
    """`command` is this interpreter with our flags (-I -S) running a script, unbuffered: the
    execute_code kernel under Talaria's own Python."""
    return (
        len(command) >= 5 and command[1:4] == ["-I", "-S", "-u"] and command[4].endswith(".py")
        # The path itself, not its target: a venv's python links to the base interpreter,
        # but started by its own path it sees the venv's packages.
        and command[0] == sys.executable
    )


def run_here(command: list[str]) -> None:
    """Run the script in this process instead of exec'ing a second interpreter (~20 ms of a
    cold start). Confinement is already in place; Python's own signal setup is what the
    script would get after an exec anyway."""
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(write_through=True)  # what -u gives
    sys.argv = command[4:]
    runpy.run_path(command[4], run_name="__main__")
    sys.exit(0)


def execute(command: list[str]) -> None:
    if same_python(command):
        run_here(command)
    # Python ignores SIGPIPE and SIGXFSZ; the command must not inherit that (`yes | head`).
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"talaria-sandbox: cannot run {command[0]}: {exc}", file=sys.stderr, flush=True)
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)


def supervise(command: list[str]) -> None:
    """Run `command` as our child; exit as it exits; kill the group if the caller dies."""
    me = os.getpid()
    leader = os.getpgid(0) == me  # the caller used start_new_session: the group is ours

    child = 0

    def parent_died(*_: object) -> None:
        if leader:
            os.killpg(0, signal.SIGKILL)
        if child:  # without start_new_session the group is not ours to kill: the child only
            os.kill(child, signal.SIGKILL)
        os._exit(128 + signal.SIGKILL)

    signal.signal(PARENT_DIED, parent_died)
    child = os.fork()
    if child == 0:
        signal.signal(PARENT_DIED, signal.SIG_DFL)
        landlock.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != me:
            os._exit(FAILED)
        execute(command)

    def forward(sig: int, _: object) -> None:
        with contextlib.suppress(OSError):  # already exited
            os.kill(child, sig)

    for sig in FORWARDED:
        signal.signal(sig, forward)
    # Hold no pipe or socket open: the caller sees EOF when the command's side closes.
    os.closerange(0, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    _, status = os.waitpid(child, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(me, sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status))


def main(argv: list[str]) -> None:
    try:
        config = json.loads(argv[1])
        command = argv[argv.index("--", 2) + 1:]
        if not command:
            raise ValueError("no command")
        confine(config)
    except (OSError, ValueError, KeyError, IndexError) as exc:
        print(f"talaria-sandbox: {exc}", file=sys.stderr, flush=True)
        os._exit(FAILED)
    if config["tier"] == "bubblewrap":
        execute(command)
    else:
        supervise(command)


if __name__ == "__main__":
    main(sys.argv)
