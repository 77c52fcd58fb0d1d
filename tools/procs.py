"""Children that die with the agent: a marker, process-group records, a watchdog, a reaper.

Whatever Talaria starts (local commands, execute_code kernels; MCP servers and containers
later) is spawned in its own process group with the agent's marker in its environment, and
recorded while it runs:

    proc = spawn(argv, env=procs.child_env(env), start_new_session=True)
    record = procs.track(proc.pid, "command")  # $TALARIA_HOME/run/pgroups/<agent pid>-<pgid>
    ...                                       # the caller kills the group when done
    record.close()

`child_env` starts, once per agent process, a watchdog: this file run as a script, in a
session of its own, blocked on a pipe that only the agent holds. When the agent dies, even by
`kill -9` or with its whole process group, the pipe closes and the watchdog kills every group
the agent recorded and every process whose environment carries the agent's marker (so a
`setsid` does not hide from it, and nothing waits on a per-thread parent-death signal), then
removes the agent's records and exits. One watchdog per agent, not one launcher per command:
a command costs a file write, not a second interpreter.

`reap_orphans()`, called when `talaria acp` or `talaria run` starts, does the same for the
records of agents that are gone and whose watchdog did not finish (killed along with the
agent, the OOM killer, a reboot).

Pid reuse: an agent is its pid plus its start time (and the boot); a recorded group is killed
only while its leader has the recorded start time or one of its processes carries the marker.
Processes of another user are never touched (their environment cannot be read).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess

MARKER_VAR = "TALARIA_AGENT"
"""Environment variable naming the agent (`<pid>-<start time>`) that started a process."""
RECORDS = ("run", "pgroups")
"""Where records live, under $TALARIA_HOME."""
PART = ".part"
"""Suffix of a record being written."""
POLL_S = 1.0
"""The watchdog checks this often whether its agent was re-parented away (pipe inherited by a
forked child of the agent, which would delay the end of the pipe)."""
EXIT_WAIT_S = 5.0
"""After the pipe closes, how long the watchdog waits for the agent to actually exit."""

_home: Path | None = None
_watchdog: subprocess.Popen[bytes] | None = None
_watchdog_owner = 0


def records_dir(home: Path | None = None) -> Path:
    from talaria.tools.home import talaria_home

    return Path(home or _home or talaria_home()).expanduser().joinpath(*RECORDS)


def _stat(pid: int) -> list[bytes] | None:
    """Fields of /proc/PID/stat after the command name (state first), or None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_time(pid: int) -> int | None:
    """Clock ticks after boot at which `pid` started; None if it is gone or a zombie."""
    fields = _stat(pid)
    if fields is None or fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


_marker: tuple[int, str] = (0, "")


def marker() -> str:
    """This agent's marker: `<pid>-<start time>`."""
    global _marker
    pid = os.getpid()
    if _marker[0] != pid:  # first call, or a forked child
        _marker = (pid, f"{pid}-{start_time(pid)}")
    return _marker[1]


def alive(agent: str) -> bool:
    """Whether the agent a marker names still runs (same pid, same start time)."""
    pid, _, started = agent.partition("-")
    return pid.isdigit() and str(start_time(int(pid))) == started


def configure(home: Path) -> None:
    """Keep records under `home` (the config's TALARIA_HOME) from now on."""
    global _home
    _home = home


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` (default: ours) plus the agent's marker; starts the watchdog the first time."""
    ensure_watchdog()
    return {**(os.environ if env is None else env), MARKER_VAR: marker()}


def ensure_watchdog() -> None:
    """Start this process's watchdog unless it runs (a forked child starts its own)."""
    global _watchdog, _watchdog_owner
    import subprocess  # not at import time: `talaria acp` reaps before it answers `initialize`

    if _watchdog is not None and _watchdog_owner == os.getpid() and _watchdog.poll() is None:
        return
    env = {k: v for k, v in os.environ.items() if k != MARKER_VAR}
    argv = [sys.executable, "-I", "-S", os.path.abspath(__file__), "watch",
            str(records_dir()), marker()]
    _watchdog = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True, env=env,
                                 cwd="/")
    _watchdog_owner = os.getpid()


class Record:
    """One recorded process group; `close()` once the group is gone (safe to call twice).
    (A plain class: `talaria acp` imports this module before it answers `initialize`, and a
    dataclass costs a millisecond to build.)"""

    __slots__ = ("path",)

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def close(self) -> None:
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
            self.path = None


def track(pgid: int, kind: str) -> Record:
    """Record the group `pgid` (its leader just started) as this agent's. Never raises: a
    home that cannot be written loses only the next-start reaping (the watchdog still kills
    by marker)."""
    directory = records_dir()
    path = directory / f"{os.getpid()}-{pgid}"
    record = {"agent": marker(), "pgid": pgid, "leader_start": start_time(pgid), "kind": kind,
              "boot": boot_id()}
    try:
        directory.mkdir(parents=True, exist_ok=True)
        part = path.with_name(path.name + PART)  # whole or absent: a reader never sees half
        part.write_text(json.dumps(record))
        os.replace(part, path)
    except OSError:
        return Record(None)
    return Record(path)


def _processes() -> list[tuple[int, int]]:
    """(pid, pgid) of every live, non-zombie process but this one."""
    out = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        fields = _stat(int(name))
        if fields is not None and fields[0] not in (b"Z", b"X"):
            out.append((int(name), int(fields[2])))
    return out


def _marker_of(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read()
    except OSError:  # gone, or another user's
        return None
    key = MARKER_VAR.encode() + b"="
    for item in environ.split(b"\0"):
        if item.startswith(key):
            return item[len(key):].decode(errors="replace")
    return None


def reap(agents: Iterable[str], records: list[tuple[Path, dict]]) -> int:
    """Kill what the dead `agents` left: the recorded groups and every marked process.
    Removes `records`. Returns how many processes were signalled."""
    agents = set(agents)
    procs = _processes()
    marked = {pid: m for pid, _ in procs if (m := _marker_of(pid)) in agents}
    groups: set[int] = set()
    for _, record in records:
        pgid = record.get("pgid")
        if not isinstance(pgid, int) or record.get("agent") not in agents:
            continue
        members = [pid for pid, group in procs if group == pgid]
        same_leader = record.get("leader_start") is not None and \
            start_time(pgid) == record.get("leader_start")
        if same_leader or any(marked.get(pid) == record["agent"] for pid in members):
            groups.add(pgid)
    killed = 0
    for pgid in groups:
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGKILL)
            killed += sum(1 for _, group in procs if group == pgid)
    for pid in marked:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    for path, _ in records:
        with contextlib.suppress(OSError):
            path.unlink()
    return killed


def _read_records(directory: Path) -> list[tuple[Path, dict]]:
    out: list[tuple[Path, dict]] = []
    try:
        entries = list(directory.iterdir())
    except OSError:
        return out
    for path in entries:
        if path.name.endswith(PART):
            continue
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            record = {}
        out.append((path, record if isinstance(record, dict) else {}))
    return out


def reap_orphans(home: Path | None = None) -> int:
    """At start: kill what crashed agents left (records whose agent is gone), and point
    later records at `home`. Cheap when there is nothing to do (one directory listing)."""
    if home is not None:
        configure(home)
    records = _read_records(records_dir())
    if not records:
        return 0
    boot = boot_id()
    stale, dead = [], set()
    for path, record in records:
        agent = record.get("agent")
        if record.get("boot") != boot or not isinstance(agent, str):
            with contextlib.suppress(OSError):  # another boot (or unreadable): nothing runs
                path.unlink()
        elif not alive(agent):
            stale.append((path, record))
            dead.add(agent)
    return reap(dead, stale) if stale else 0


def watch(directory: str, agent: str) -> None:
    """The watchdog: wait for the agent to die, then reap what it started."""
    pid = int(agent.partition("-")[0])
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)  # only the agent's end matters
    while os.getppid() == pid:
        ready, _, _ = select.select([0], [], [], POLL_S)
        if ready and not os.read(0, 4096):
            # EOF: the agent closed it by exiting. Never reap a live agent's children.
            deadline = time.monotonic() + EXIT_WAIT_S
            while alive(agent) and time.monotonic() < deadline:
                time.sleep(0.01)
            if alive(agent):
                return
            break
    mine = [(p, r) for p, r in _read_records(Path(directory)) if r.get("agent") == agent]
    reap({agent}, mine)


if __name__ == "__main__":
    if sys.argv[1:2] == ["watch"]:
        watch(sys.argv[2], sys.argv[3])
