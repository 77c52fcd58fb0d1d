"""The sandbox's first program: confine itself, then run the command.

Run as `python -I -S -c tiers.BOOT CONFIG_JSON -- ARGV...` (built by
`talaria.tools.sandbox.tiers.prepare`; inside bwrap in the bubblewrap tier), or as a script
`python -I -S launch.py CONFIG_JSON -- ARGV...`. Standard library
only. In order: the pids cgroup (root), parent-death signal, resource limits, (bubblewrap, as
root) a per-namespace `pid_max` and a read-only /proc/sys, (other tiers, where it may mount) a
sized tmpfs on TMPDIR in a mount namespace of its own, TMPDIR, no_new_privs, (as root) an empty
capability bounding set, Landlock, seccomp. Doing this here rather than in a `preexec_fn`
keeps the caller's fork async-signal-safe (the agent has threads), lets callers use
`anyio.open_process`, and leaves bwrap itself unfiltered.

Then, in bwrap, it execs the command (bwrap's PID namespace ends everything with it). Without a
PID namespace a parent-death signal would kill only the command, not what the command started:
so there the launcher stays as a small supervisor that forks the command, forwards signals and
the exit status, SIGKILLs its whole process group when the caller dies, and (where it could not
mount a tmpfs) stops the sandbox when TMPDIR grows past its bound.

Cold start matters (each execute_code kernel starts here): no module that pulls in `re`,
`enum`, `platform` or `runpy` beyond what `json` needs; each costs milliseconds.

Any failure exits with `FAILED` (125) and one line on stderr: the sandbox fails closed.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
import time

# Run as a script with -I -S (no site, so no installed or editable `talaria`): its two
# helpers are imported from this folder, and they import nothing but the standard library.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import landlock  # type: ignore[import-not-found]  # noqa: E402  (this folder, see above)
import seccomp  # type: ignore[import-not-found]  # noqa: E402

FAILED = 125
PARENT_DIED = signal.SIGRTMIN + 1
"""The supervisor's parent-death signal (not SIGKILL: it must act on it)."""
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
             signal.SIGUSR2)
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 1, 24, 47, 4
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
CLONE_NEWNS = 0x00020000
TMP_POLL_S = 0.1
"""Without a tmpfs, how often the supervisor measures TMPDIR (more rarely if that is slow)."""
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
    nr = SYS_CAPSET.get(os.uname().machine)
    if nr is not None:
        header = (ctypes.c_uint32 * 2)(CAP_VERSION_3, 0)
        data = (ctypes.c_uint32 * 6)()  # two {effective, permitted, inheritable}, all empty
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syscall(ctypes.c_long(nr), header, data) != 0:
            raise OSError(ctypes.get_errno(), "capset")


def join_cgroup(path: str) -> None:
    """Move this process (and so all it starts) into the pids cgroup the caller made: done
    by `early` while we were imported, else now."""
    if "early" in sys.modules and sys.modules["early"].joined(path):
        return
    with open(os.path.join(path, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))


def mount_tmpfs(dirs: list[str], size: int) -> bool:
    """A tmpfs of `size` bytes on each of `dirs`, in a mount namespace of our own, so the host
    never sees it and it ends with the sandbox. False where we may not (not root)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        return False
    cwd = os.getcwd()
    # A shared / (systemd's default) would propagate our mounts back to the host.
    steps: list[tuple[bytes, bytes, bytes | None, int, bytes | None]] = [
        (b"none", b"/", None, MS_REC | MS_PRIVATE, None)]
    steps += [(b"tmpfs", d.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, f"size={size}".encode())
              for d in dirs]
    for source, target, fstype, flags, data in steps:
        if libc.mount(source, target, fstype, ctypes.c_ulong(flags), data) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"mount {target.decode()}: {os.strerror(err)}")
    os.chdir(cwd)  # the cwd may be one of `dirs`: look it up again, on the tmpfs
    return True


def confine(config: dict) -> list[str]:
    """Confine this process per `config`; returns the dirs the supervisor must measure."""
    tier = config["tier"]
    root = os.geteuid() == 0
    if config.get("cgroup") and root:  # not root: RLIMIT_NPROC applies (see set_limits)
        join_cgroup(config["cgroup"])
    # bwrap --die-with-parent does it there; not for a parent that is not the agent (an
    # editor's terminal: the signal follows the thread that spawned us, which may end first).
    if tier != "bubblewrap" and config.get("die_with_parent", True):
        landlock.prctl(PR_SET_PDEATHSIG, PARENT_DIED)
        if config.get("parent") and os.getppid() != config["parent"]:
            raise OSError("the caller exited before the sandbox started")
    set_limits(config["limits"])
    if tier == "bubblewrap" and root:
        seal_pid_namespace(config["limits"]["processes"])
    measure = list(config.get("tmp") or ())
    if measure and mount_tmpfs(measure, config["limits"]["tmp_bytes"]):
        measure = []
    tmpdir = config.get("tmpdir")
    current = os.environ.get("TMPDIR", "")
    if tmpdir and not (current and any(_within(current, d) for d in config["writable"])):
        os.environ["TMPDIR"] = tmpdir
    if tier == "rlimits":
        return measure
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
    return measure


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
    script would get after an exec anyway. What `runpy.run_path` does for a plain file, without
    importing runpy (~1 ms), and from the script's cached bytecode when it is current
    (compiling the kernel's source took ~8 ms; the agent writes the cache, see `tiers`)."""
    # importlib.machinery's loader, without importing the importlib package (~1 ms).
    from _frozen_importlib_external import SourceFileLoader

    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(write_through=True)  # type: ignore[union-attr]  # what -u gives
    path = command[4]
    sys.argv = command[4:]
    while HERE in sys.path:  # as `python -I path` would have it: no script dir on the path
        sys.path.remove(HERE)
    code = SourceFileLoader("__main__", path).get_code("__main__")
    assert code is not None  # a source file always has code
    main = type(sys)("__main__")
    main.__file__ = path
    sys.modules["__main__"] = main
    exec(code, main.__dict__)
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


def disk_usage(dirs: list[str]) -> int:
    """Bytes allocated to the files under `dirs` (sparse files count what they use)."""
    total, stack = 0, list(dirs)
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    total += entry.stat(follow_symlinks=False).st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                except OSError:  # removed meanwhile
                    pass
    return total


def supervise(command: list[str], measure: list[str], tmp_bytes: int) -> None:
    """Run `command` as our child; exit as it exits; kill the group if the caller dies or
    the `measure` dirs grow past `tmp_bytes`."""
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
        try:  # noqa: SIM105 (contextlib: a cold-start cost, see above)
            os.kill(child, sig)
        except OSError:  # already exited
            pass

    for sig in FORWARDED:
        signal.signal(sig, forward)
    # Hold no pipe or socket open: the caller sees EOF when the command's side closes. Only
    # when it must measure TMPDIR does it keep stderr, to say why it stopped the sandbox.
    os.closerange(0, 2 if measure else 3)
    os.closerange(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    status = watch_tmp(child, measure, tmp_bytes, parent_died) if measure else \
        os.waitpid(child, 0)[1]
    if os.WIFSIGNALED(status):
        sig = signal.Signals(os.WTERMSIG(status))
        signal.signal(sig, signal.SIG_DFL)
        os.kill(me, sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status))


def watch_tmp(child: int, measure: list[str], tmp_bytes: int, kill: object) -> int:
    """Wait for `child`, measuring `measure` meanwhile; past `tmp_bytes`, say so on stderr and
    kill the sandbox (`kill`, as when the caller dies). Returns the child's wait status."""
    interval = TMP_POLL_S
    while True:
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid:
            return status
        started = time.monotonic()
        used = disk_usage(measure)
        if used > tmp_bytes:
            message = (f"talaria-sandbox: temporary files passed the limit of {tmp_bytes:,} "
                       f"bytes ({used:,} in {', '.join(measure)}); the sandbox was stopped\n")
            try:  # noqa: SIM105
                os.write(2, message.encode())
            except OSError:
                pass
            kill()  # type: ignore[operator]
        # A big tree takes long to measure: then look less often than every TMP_POLL_S.
        interval = max(TMP_POLL_S, 10 * (time.monotonic() - started))
        time.sleep(interval)


def main(argv: list[str]) -> None:
    try:
        config = json.loads(argv[1])
        command = argv[argv.index("--", 2) + 1:]
        if not command:
            raise ValueError("no command")
        measure = confine(config)
    except (OSError, ValueError, KeyError, IndexError) as exc:
        print(f"talaria-sandbox: {exc}", file=sys.stderr, flush=True)
        os._exit(FAILED)
    if config["tier"] == "bubblewrap":
        execute(command)
    else:
        supervise(command, measure, config["limits"]["tmp_bytes"])


if __name__ == "__main__":
    main(sys.argv)
