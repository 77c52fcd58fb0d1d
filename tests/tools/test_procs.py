"""Nothing Talaria starts outlives it: kill -9 a real agent mid-command, then look for survivors;
crash the agent and its watchdog together, and the next start reaps. Real processes only."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from talaria.tools import procs
from tests import ROOT, processes
from tests.acp_harness import Editor
from tests.exec_helpers import wait_for
from tests.helpers import group_alive, openai_env

# Each variant leaves processes behind the shell in a different way; the shell writes the
# pids to watch into pids.txt and then blocks.
COMMANDS = {
    "background": "sleep 300 & echo $! >> pids.txt; echo $$ >> pids.txt; sleep 300",
    "setsid": "setsid sleep 300 & echo $! >> pids.txt; echo $$ >> pids.txt; sleep 300",
    "nohup-disowned": "nohup sleep 300 >/dev/null 2>&1 & disown; echo $! >> pids.txt; "
                      "echo $$ >> pids.txt; sleep 300",
}


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def running(pid: int) -> bool:
    return procs.start_time(pid) is not None


def pids_of(project: Path) -> list[int]:
    path = project / "pids.txt"
    lines = path.read_text().split() if path.exists() else []
    return [int(x) for x in lines]


def watchdog_of(agent_pid: int) -> int | None:
    """The watchdog process started by `agent_pid` (found by its command line)."""
    for entry in processes():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"watch" in argv and any(a.startswith(f"{agent_pid}-".encode()) for a in argv) \
                and running(int(entry.name)):
            return int(entry.name)
    return None


@pytest.mark.parametrize("variant", list(COMMANDS))
def test_a_command_dies_with_a_killed_acp_agent(tmp_path: Path, fake_llm, variant: str) -> None:
    fake_llm.script([call("terminal", command=COMMANDS[variant])])
    ed = Editor(tmp_path, fake_llm)
    ed.initialize(terminal=False)  # the agent runs the command itself
    sid = ed.new_session()
    ed.send_prompt(sid, "run it")
    pids = ed.wait_for(lambda: len(pids_of(ed.project)) == 2 and pids_of(ed.project),
                       what="the command")
    assert all(running(p) for p in pids)
    records = ed.home / "run" / "pgroups"

    def kinds() -> list[str]:  # records are written (whole, by rename) just after the spawn
        return sorted(json.loads(r.read_text())["kind"] for r in records.iterdir()
                      if not r.name.endswith(procs.PART))

    found = ed.wait_for(lambda: "command" in kinds() and kinds(), what="the command's record")
    assert found in (["command"], ["command", "execute_code"])  # the prestarted kernel too
    ed.kill9()
    ed.close()
    assert wait_for(lambda: not any(running(p) for p in pids), 10), "a process survived"
    # The rest of its group is killed with it, but may still be exiting at that instant (a
    # full suite on 2 cores once saw it): the group must be gone within the same bound.
    assert wait_for(lambda: not group_alive(pids[1]), 10), "a process of its group survived"
    assert wait_for(lambda: not any((ed.home / "run" / "pgroups").iterdir()), 10)


def test_a_command_dies_with_a_killed_talaria_run(tmp_path: Path, fake_llm) -> None:
    """`talaria run` (in process, no ACP) killed with its whole process group, as a terminal's
    Ctrl-\\ or a crash would: its watchdog lives in a session of its own and still reaps."""
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    fake_llm.script([call("terminal", command=COMMANDS["setsid"])])
    env = {**os.environ, **openai_env(fake_llm), "TALARIA_HOME": str(home),
           "TALARIA_MODEL": "openai:fake", "PYTHONPATH": str(ROOT)}
    agent = subprocess.Popen(
        [sys.executable, "-m", "talaria.acp_server", "run", "do it", "--yes", "--cwd", str(project)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert wait_for(lambda: len(pids_of(project)) == 2, 30), "the command never started"
        pids = pids_of(project)
        assert all(running(p) for p in pids)
    finally:
        os.killpg(agent.pid, signal.SIGKILL)
        agent.wait()
    assert wait_for(lambda: not any(running(p) for p in pids), 10), "a process survived"


def test_the_next_start_reaps_what_a_crash_left(tmp_path: Path, fake_llm) -> None:
    """The agent and its watchdog die together (the OOM killer, `kill -9` of both): the
    command survives until the next `talaria acp` starts on the same TALARIA_HOME."""
    fake_llm.script([call("terminal", command=COMMANDS["setsid"])])
    ed = Editor(tmp_path, fake_llm)
    ed.initialize(terminal=False)
    sid = ed.new_session()
    ed.send_prompt(sid, "run it")
    pids = ed.wait_for(lambda: len(pids_of(ed.project)) == 2 and pids_of(ed.project),
                       what="the command")
    assert ed.proc is not None
    watchdog = watchdog_of(ed.proc.pid)
    assert watchdog is not None
    os.kill(watchdog, signal.SIGKILL)
    ed.kill9()
    ed.close()
    try:
        time.sleep(0.3)
        assert all(running(p) for p in pids), "left behind, as a crash would leave them"
        assert list((tmp_path / "home" / "run" / "pgroups").iterdir())
        with Editor(tmp_path, fake_llm) as again:
            again.initialize()
            assert wait_for(lambda: not any(running(p) for p in pids), 10), "not reaped"
            assert not list((tmp_path / "home" / "run" / "pgroups").iterdir())
    finally:
        for pid in pids:
            if running(pid):
                os.kill(pid, signal.SIGKILL)


def spawn(marker: str | None, *, session: bool = True) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != procs.MARKER_VAR}
    if marker:
        env[procs.MARKER_VAR] = marker
    return subprocess.Popen(["sleep", "60"], env=env, start_new_session=session)


def dead_marker() -> str:
    """The marker of an agent that has exited."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    return f"{gone.pid}-123"


def write_record(home: Path, agent: str, pgid: int, leader_start: int | None,
                 boot: str | None = None) -> Path:
    path = procs.records_dir(home) / f"{agent.split('-')[0]}-{pgid}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"agent": agent, "pgid": pgid, "leader_start": leader_start,
                                "kind": "command", "boot": boot or procs.boot_id()}))
    return path


def test_reap_orphans_kills_only_what_a_dead_agent_owns(tmp_path: Path) -> None:
    """Guards against pid reuse and other boots; live agents' groups are left alone."""
    dead = dead_marker()
    owned = spawn(dead)                                   # recorded, marked
    escaped = spawn(dead)                                 # marked, in no record (setsid)
    reused = spawn(None)                                  # a stranger now holds a recorded pgid
    live_agent = spawn(None)
    live = spawn(f"{live_agent.pid}-{procs.start_time(live_agent.pid)}")
    other_boot = spawn(None)
    try:
        write_record(tmp_path, dead, owned.pid, procs.start_time(owned.pid))
        write_record(tmp_path, dead, reused.pid, 1)       # leader started at another time
        write_record(tmp_path, f"{live_agent.pid}-{procs.start_time(live_agent.pid)}", live.pid,
                     procs.start_time(live.pid))
        write_record(tmp_path, dead, other_boot.pid, procs.start_time(other_boot.pid),
                     boot="another-boot")
        assert procs.reap_orphans(tmp_path) >= 2
        assert owned.wait(5) == -signal.SIGKILL and escaped.wait(5) == -signal.SIGKILL
        for proc in (reused, live, other_boot):
            assert proc.poll() is None
        left = [p.name for p in procs.records_dir(tmp_path).iterdir()]
        assert left == [f"{live_agent.pid}-{live.pid}"], "only the live agent's record stays"
    finally:
        for proc in (owned, escaped, reused, live_agent, live, other_boot):
            proc.kill()
            proc.wait()


def test_reap_orphans_is_a_no_op_without_records(tmp_path: Path) -> None:
    assert procs.reap_orphans(tmp_path) == 0
    assert not procs.records_dir(tmp_path).exists()


def test_a_record_that_cannot_be_written_is_no_error(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "run").write_text("a file where the records dir would go")
    monkeypatch.setattr(procs, "_home", tmp_path)
    record = procs.track(os.getpid(), "command")
    assert record.path is None
    record.close()


WATCHED = """
import subprocess, sys, time
from talaria.tools import procs
child = subprocess.Popen(["sleep", "60"], env=procs.child_env(), start_new_session=True)
procs.track(child.pid, "command")
print(child.pid, flush=True)
if sys.argv[1] == "exit":
    sys.exit(0)
time.sleep(60)
"""


@pytest.mark.parametrize("how", ["kill", "exit"])
def test_the_watchdog_reaps_on_kill_and_on_exit(tmp_path: Path, how: str) -> None:
    """A caller that dies (or just exits without cleaning up) leaves nothing running."""
    env = {**os.environ, "TALARIA_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    agent = subprocess.Popen([sys.executable, "-c", WATCHED, how], env=env,
                             stdout=subprocess.PIPE, text=True)
    assert agent.stdout is not None
    child = int(agent.stdout.readline())
    if how == "kill":
        agent.kill()
    agent.wait()
    assert wait_for(lambda: not running(child), 10)
    assert wait_for(lambda: not any(procs.records_dir(tmp_path).iterdir()), 10)


def test_a_live_agents_watchdog_does_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "TALARIA_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    agent = subprocess.Popen([sys.executable, "-c", WATCHED, "stay"], env=env,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert agent.stdout is not None
        child = int(agent.stdout.readline())
        time.sleep(procs.POLL_S * 1.5)
        assert running(child) and watchdog_of(agent.pid) is not None
    finally:
        agent.kill()
        agent.wait()
    assert wait_for(lambda: not running(child), 10)
