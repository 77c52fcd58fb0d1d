"""The sandbox: confine a child process in the strongest tier this machine offers.

Used by execute_code's kernel and by commands that run without the user having seen them
(`command_spec`; see talaria.agent.permissions).

`prepare(argv, spec)` returns the command to spawn; the caller runs it with
`start_new_session=True` and `pass_fds` (one end of a SOCK_STREAM socketpair), then calls
`prepared.cleanup()` once it has exited. The command starts with `tools/sandbox_launch.py`,
which confines itself and then runs `argv`; so `preexec_fn` is always None and
`anyio.open_process` works too. Spawn from a long-lived thread (the event loop's): the
parent-death signal fires when the *thread* that forked exits.

What each tier guarantees (tests/test_sandbox.py asserts exactly this, on every tier here):

| attack                           | bubblewrap                | landlock                    | rlimits |
|----------------------------------|---------------------------|-----------------------------|---------|
| write outside `writable`         | no (read-only root)       | no (Landlock)               | yes     |
| read ~/.ssh, $TALARIA_HOME, ...  | no (empty tmpfs on them)  | no (names listable)         | yes     |
| change a `readonly` path         | no (read-only bind; its   | no (no write rights on it,  | yes     |
|  (write, rm, mv/ln over, ...)    | dirs pinned as mounts)    | nor new entries around it)  |         |
| temp files                       | private tmpfs /tmp        | TMPDIR: a private dir       | as host |
| fill the disk with temp files    | no (tmpfs of `tmp_bytes`) | no (**)                     | (**)    |
| TCP/UDP to the host, internet    | no (own network namespace)| no (seccomp; Landlock TCP)  | yes     |
| connect to a host Unix socket    | no (seccomp: no AF_UNIX)  | no (seccomp: no AF_UNIX)    | yes     |
| see / signal host processes      | no (PID namespace)        | no if Landlock ABI >= 6     | yes     |
| feed keys to a tty (TIOCSTI)     | no (seccomp)              | no (seccomp)                | yes     |
| escape the caller's killpg       | no (PID namespace)        | no (seccomp: no setsid)     | setsid  |
| outlive the caller (kill -9)     | no (--die-with-parent)    | no (supervisor kills group) | setsid  |
| memory, CPU, file size, fds      | rlimits                   | rlimits                     | rlimits |
| processes (fork bomb)            | bounded (*)               | bounded (*)                 | same    |
| capabilities, when run as root   | none                      | none                        | all     |

(*) non-root: RLIMIT_NPROC, counted inside bwrap's user namespace (outside one it counts all
the user's tasks, so the launcher allows `processes` more than exist). Root: RLIMIT_NPROC does
not apply to uid 0. So a root sandbox gets a pids cgroup of `processes` tasks where a pids
controller is writable (`sandbox.cgroup`; cgroup v1, or v2 with `pids` delegable), and under
bwrap the PID namespace's own `pid_max` too (Linux >= 6.14; the kernel's floor is 301).
Without either a root fork bomb is bounded in time only (the caller's timeout and killpg;
seccomp keeps every process in the group). We do not switch root to `nobody`: root-owned
project files would turn read-only and git would refuse the repository ("dubious ownership").
(**) TMPDIR (`SandboxSpec.tmp`, else the private dir) holds at most `tmp_bytes`: where the
launcher may mount (root) a tmpfs of that size in a mount namespace of the sandbox's own,
else its supervisor measures the dir and stops the sandbox when it grows past (a burst
between two looks can pass the bound by what is written in that time; each file stays under
`file_size_bytes`). Under bwrap, /tmp and `tmp` are each a tmpfs of `tmp_bytes`. The rlimits
tier bounds TMPDIR only when `tmp` is given; other temp dirs are the host's.
Prepared.warnings says when a bound is missing.

A hidden or `readonly` path inside a writable dir costs nothing on bubblewrap (except for a
`readonly` path not created yet: its directory takes no new entries). Landlock cannot take a
right back below a grant, so there the writable dir is granted entry by entry around the
protected path, and the directories on the way to it take no new entries, renames or removals
(their existing entries stay writable). `Prepared.warnings` says so.

Decisions:
- Unix sockets: `socket()` fails for every family but AF_INET/AF_INET6 (bubblewrap, or when
  `network`), so no host socket (docker, ssh-agent, D-Bus) is reachable whatever its mode. Costs:
  multiprocessing managers and forkserver, syslog, nscd. `socketpair()` (stream) and pipes still
  work, so `multiprocessing.Pool` with fork does. Inherited fds always work.
- bwrap --new-session: omitted. It would move the sandbox out of the caller's process group
  (killpg then kills bwrap only, the rest dies a moment later through --die-with-parent, and
  SIGTERM never reaches the command). It guards against TIOCSTI, which seccomp denies instead.
- Root: bwrap keeps every capability for root inside (it could remount / read-write, and uid 0
  may write most sysctls, e.g. core_pattern): the launcher makes /proc/sys read-only and drops
  every capability, in both confining tiers.
- RLIMIT_AS bounds address space, not RSS: runtimes that reserve big arenas (Go, the JVM) need
  a larger `memory_bytes`. RLIMIT_CPU is per process.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path

from talaria.tools.errors import SandboxError
from talaria.tools.home import talaria_home
from talaria.tools.sandbox import cgroup as sandbox_cgroup
from talaria.tools.sandbox import landlock as sandbox_landlock
from talaria.tools.sandbox import seccomp as sandbox_seccomp
from talaria.tools.sandbox.bwrap import BWRAP_NAMESPACES, bwrap_args, protect_mounts, within
from talaria.tools.sandbox.bytecode import precompile

log = logging.getLogger(__name__)

TIERS = ("bubblewrap", "landlock", "rlimits")
PYTHON = sys.executable
"""Interpreter for the launcher; must be readable inside the sandbox."""
LAUNCHER = Path(__file__).resolve().with_name("launch.py")
BOOT = (f"import sys; sys.path.insert(0, {str(LAUNCHER.parent)!r}); import early; "
        "from launch import main; main(sys.argv)")
"""`python -c BOOT CONFIG -- ARGV`: the launcher imported as a module, so run from its cached
bytecode (`bytecode.precompile`); run as a script, it was compiled at every start (~8 ms).
`early` joins the pids cgroup while `launch` is imported."""
LAUNCHER_FILES = ("launch.py", "early.py", "landlock.py", "seccomp.py")
"""What the launcher imports: their bytecode is cached by the agent, since a sandbox cannot."""
PACKAGE_ROOT = LAUNCHER.parents[2]
"""talaria's own files (the kernel's child script among them): readable inside the sandbox."""
DETECT_TIMEOUT_S = 10.0
HIDDEN_IN_HOME = (".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".config/gh", ".kube",
                  ".docker", ".netrc", ".pgpass", ".git-credentials", ".npmrc", ".pypirc")
"""Credential stores hidden by default, relative to $HOME (`paths.HOME_SECRETS` and the
credential files); plus all of $TALARIA_HOME."""
PER_NS_PID_MAX = (6, 14)
"""First kernel with a pid_max per PID namespace."""


@dataclass(frozen=True, slots=True)
class Limits:
    memory_bytes: int = 2 * 1024**3
    """RLIMIT_AS per process."""
    processes: int = 256
    """Tasks (threads count) the sandbox may add; see the module docstring for root."""
    cpu_seconds: int = 600
    """RLIMIT_CPU per process: SIGXCPU, then SIGKILL one second later."""
    file_size_bytes: int = 1024**3
    """RLIMIT_FSIZE: larger writes fail with EFBIG."""
    open_files: int = 1024
    """RLIMIT_NOFILE."""
    tmp_bytes: int = 512 * 1024**2
    """Temporary files in all (TMPDIR; /tmp too under bwrap): tmpfs is memory, keep it modest."""


@dataclass(frozen=True, slots=True)
class SandboxSpec:
    writable: tuple[Path, ...]
    """Directories the sandbox may write (project dir, or a staging dir); must exist."""
    network: bool = False
    """Allow TCP/UDP to the host and the internet."""
    limits: Limits = Limits()
    readable_hidden: tuple[Path, ...] = ()
    """Extra paths to hide, on top of `default_hidden()`."""
    tmp: Path | None = None
    """The sandbox's TMPDIR: an existing dir, writable, private to the sandbox (under bwrap and
    where the launcher may mount, a tmpfs: the host never sees what is written there) and
    bounded by `limits.tmp_bytes`. None: /tmp under bwrap, else a fresh private dir."""
    readonly: tuple[Path, ...] = ()
    """Paths inside `writable` that must stay as they are (edits the user rejected); they
    may not exist yet. See `_protect_mounts` and the launcher's Landlock rules."""
    tier: str | None = None
    """Tier override; None: `detect_tier()`."""


COMMAND_LIMITS = Limits(memory_bytes=64 * 1024**3, processes=1024, cpu_seconds=3600,
                        file_size_bytes=16 * 1024**3, open_files=65536, tmp_bytes=4 * 1024**3)
"""Commands build and test software: address space for JIT runtimes, room for `make -j`."""


def command_spec(writable: tuple[Path, ...], *, readonly: tuple[Path, ...] = (), hidden:
                 tuple[Path, ...] = (), network: bool = False, tier: str | None = None) -> SandboxSpec:
    """How a command the user has not seen runs: `writable` (the project) writable, the rest
    read-only, credential stores and `hidden` hidden, `readonly` kept as they are."""
    return SandboxSpec(writable=writable, network=network, limits=COMMAND_LIMITS,
                       readable_hidden=hidden, readonly=readonly, tier=tier)


def _noop() -> None:
    return None


@dataclass(frozen=True, slots=True)
class Prepared:
    argv: list[str]
    preexec_fn: Callable[[], None] | None
    """Always None: the launcher in `argv` does the confining."""
    tier: str
    warnings: tuple[str, ...] = ()
    cleanup: Callable[[], None] = field(default=_noop)
    """Call once the process has exited: removes the landlock tier's private TMPDIR."""


def default_hidden(env: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """Credential stores under $HOME and $TALARIA_HOME (`tools.home`)."""
    env = os.environ if env is None else env
    home = Path(env.get("HOME") or Path.home())
    return (*(home / name for name in HIDDEN_IN_HOME), talaria_home(env, home))


_tier: str | None = None


def detect_tier(*, refresh: bool = False) -> str:
    """The strongest tier that works here: bwrap is actually run once. Cached, logged once."""
    global _tier
    if _tier is None or refresh:
        if refresh:
            _bwrap_probe.cache_clear()
        if _bwrap_works():
            _tier = "bubblewrap"
        elif landlock_abi() >= 1:
            _tier = "landlock"
        else:
            _tier = "rlimits"
        if _tier == "rlimits":
            log.warning("sandbox: neither bubblewrap nor Landlock works here; "
                        "execute_code runs with resource limits only")
        else:
            log.info("sandbox: %s tier", _tier)
    return _tier


def _bwrap_works() -> bool:
    return _bwrap_probe() is not None


def bwrap_sizes_tmpfs() -> bool:
    """Whether this bwrap takes `--size` for a tmpfs (bubblewrap >= 0.7)."""
    return bool(_bwrap_probe())


@cache
def _bwrap_probe() -> bool | None:
    """None: bwrap does not work here; else whether it can size a tmpfs. Runs bwrap once or
    twice (an older bwrap rejects `--size`)."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return None
    for size in (["--size", str(1024**2)], []):
        argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *size,
                "--tmpfs", "/tmp", *BWRAP_NAMESPACES, "--unshare-net", "--die-with-parent",
                "--", "true"]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=DETECT_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError):
            return None
        if done.returncode == 0:
            return bool(size)
        log.info("sandbox: bwrap %s does not work here: %s", " ".join(size),
                 done.stderr.decode(errors="replace")[:200])
    return None


@cache
def landlock_abi() -> int:
    return sandbox_landlock.abi_version()


def prepare(argv: list[str], spec: SandboxSpec, *, tier: str | None = None,
            pass_fds: tuple[int, ...] = (), local: bool = True) -> Prepared:
    """The command that runs `argv` confined by `spec` in `tier` (default: `spec.tier`, else
    `detect_tier()`). `pass_fds`: the fds the caller will pass (bwrap keeps inherited fds; seccomp restricts only
    new sockets). `local=False`: another process (an editor's terminal) spawns it, so the
    parent is not checked and its death not followed (the signal follows the spawning thread,
    which may end at once; the editor kills and releases its terminals itself).
    """
    tier = tier or spec.tier or detect_tier()
    if tier not in TIERS:
        raise SandboxError(f"unknown sandbox tier {tier!r}; expected one of {TIERS}")
    if tier == "landlock" and landlock_abi() < 1:
        raise SandboxError("Landlock is not available on this kernel")
    if tier == "bubblewrap" and not shutil.which("bwrap"):
        raise SandboxError("bwrap is not installed")
    if not argv:
        raise SandboxError("empty command")
    if any(fd < 3 for fd in pass_fds):
        raise SandboxError(f"pass_fds must be >= 3, got {pass_fds}")
    writable = []
    for path in spec.writable:
        real = os.path.realpath(path)
        if not os.path.isdir(real):
            raise SandboxError(f"writable directory does not exist: {path}")
        writable.append(real)
    hidden = sorted({os.path.realpath(p) for p in (*default_hidden(), *spec.readable_hidden)
                     if os.path.lexists(p)} - set(writable))
    # Only what lies in a writable dir needs protecting (the rest is read-only), and a
    # hidden path is protected already.
    readonly = sorted({r for r in map(os.path.realpath, spec.readonly)
                       if any(within(r, w) for w in writable)
                       and not any(within(r, h) for h in hidden)})
    # The launcher's own files, should they sit under /tmp or a hidden dir (a venv in
    # $TALARIA_HOME): bwrap binds them back read-only, Landlock grants them read.
    runtime = {str(PACKAGE_ROOT), sys.prefix, sys.base_prefix}
    exposed = sorted(p for p in runtime if any(within(p, d) for d in ("/tmp", *hidden)))
    tmpdir, cleanups = _tmpdir(spec, tier)
    limits = spec.limits
    group = None
    if os.geteuid() == 0 and tier != "bubblewrap":  # bwrap: the PID namespace's pid_max
        group = sandbox_cgroup.create(limits.processes)
        if group is not None:
            cleanups.append(lambda: sandbox_cgroup.remove(group))
    protect = protect_mounts(readonly, writable, hidden) if tier == "bubblewrap" else []
    config = {"cgroup": group, "tier": tier, "limits": asdict(limits), "writable": writable,
              "hidden": hidden, "readable": exposed, "network": spec.network, "tmpdir": tmpdir,
              "tmp": [tmpdir] if tmpdir and tier != "bubblewrap" else [],
              "readonly": readonly,
              "parent": os.getpid() if tier != "bubblewrap" and local else None,
              "die_with_parent": local}
    for name in LAUNCHER_FILES:
        precompile(LAUNCHER.with_name(name))
    launch = [PYTHON, "-I", "-S", "-c", BOOT, json.dumps(config), "--", *argv]
    if tier == "bubblewrap":
        size = limits.tmp_bytes if bwrap_sizes_tmpfs() else None
        launch = [*bwrap_args(spec.network, size, writable, hidden, exposed, tmpdir, protect,
                              die_with_parent=local), "--", *launch]
    warnings = _warnings(tier, writable, hidden, group, readonly)
    return Prepared(launch, None, tier, tuple(warnings), _run_all(cleanups))


def _tmpdir(spec: SandboxSpec, tier: str) -> tuple[str | None, list[Callable[[], None]]]:
    """The sandbox's TMPDIR, and what removes it afterwards."""
    if spec.tmp is not None:
        real = os.path.realpath(spec.tmp)
        if not os.path.isdir(real):
            raise SandboxError(f"tmp directory does not exist: {spec.tmp}")
        return real, []
    if tier == "bubblewrap":
        return "/tmp", []
    if tier == "landlock":
        path, cleanup = _private_tmp()
        return path, [cleanup]
    return None, []


def _run_all(cleanups: list[Callable[[], None]]) -> Callable[[], None]:
    if not cleanups:
        return _noop

    def run() -> None:
        for cleanup in cleanups:
            cleanup()

    return run


def _warnings(tier: str, writable: list[str], hidden: list[str], group: str | None,
              readonly: list[str]) -> list[str]:
    if tier == "rlimits":
        return ["sandbox: resource limits only; the script can read and write anything this "
                "user can, and use the network"]
    out = []
    if tier == "bubblewrap" and not bwrap_sizes_tmpfs():
        out.append("sandbox: bwrap < 0.7 cannot size a tmpfs: temporary files are bounded by "
                   "memory only")
    if not sandbox_seccomp.supported():
        out.append(f"sandbox: no seccomp filter for {os.uname().machine}: Unix sockets open")
    root = os.geteuid() == 0
    if tier == "landlock":
        if landlock_abi() < 6:
            out.append("sandbox: Landlock ABI < 6: the script can signal this user's processes "
                       "and reach abstract Unix sockets' names")
        if root and group is None:
            out.append("sandbox: running as root without a PID namespace or a writable pids "
                       "cgroup: the process count is not limited (RLIMIT_NPROC does not apply "
                       "to root)")
        inside = [p for p in (*hidden, *readonly) if any(within(p, w) for w in writable)]
        if inside:
            out.append(f"sandbox: Landlock protects {inside} by keeping the directories that "
                       "lead to them from getting new entries")
    elif root and _kernel() < PER_NS_PID_MAX:
        out.append("sandbox: running as root on a kernel without per-namespace pid_max: the "
                   "process count is not limited")
    return out


def _kernel() -> tuple[int, int]:
    try:
        major, minor = os.uname().release.split(".")[:2]
        return int(major), int("".join(c for c in minor if c.isdigit()) or 0)
    except ValueError:
        return (0, 0)


_tmp_root: str | None = None
TMP_PREFIX = "talaria-sandbox-"


def _private_tmp() -> tuple[str, Callable[[], None]]:
    """A fresh TMPDIR for one landlock-tier process, inside a per-agent dir removed at exit
    (and, if the agent was killed, by the next agent: the dir's name holds its pid)."""
    global _tmp_root
    if _tmp_root is None or not os.path.isdir(_tmp_root):
        _prune_stale_tmp()
        _tmp_root = tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-")
        atexit.register(shutil.rmtree, _tmp_root, True)
    path = tempfile.mkdtemp(dir=_tmp_root)
    return path, lambda: shutil.rmtree(path, ignore_errors=True)


def _prune_stale_tmp() -> None:
    base = Path(tempfile.gettempdir())
    for entry in base.glob(f"{TMP_PREFIX}*-*"):
        pid = entry.name[len(TMP_PREFIX):].split("-", 1)[0]
        try:
            if not pid.isdigit() or entry.lstat().st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(entry, ignore_errors=True)
        except OSError:
            continue
