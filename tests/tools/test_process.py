"""`terminal(background=true)` and `process`: real processes on every sandbox tier, their
output, input, ends, bounds, and nothing left once the session closes."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from talaria.tools import process as process_tool
from talaria.tools.local.workspace import LocalWorkspace
from talaria.tools.processes import base, table
from talaria.tools.procs import start_time
from tests.tools.shell_helpers import SERVER, TIERS, Tools, free_port, listening, project

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def eventually(predicate, seconds: float = 15.0) -> bool:  # type: ignore[no-untyped-def]
    with anyio.move_on_after(seconds):
        while not predicate():
            await anyio.sleep(0.05)
        return True
    return False


@pytest.mark.parametrize("tier", TIERS)
async def test_a_background_server_answers_a_later_command_and_dies_with_the_session(
        tmp_path: Path, tier: str | None) -> None:
    root = project(tmp_path)
    run = Tools(LocalWorkspace(root), tier)
    port = free_port()
    await run("terminal", command="cd sub && echo served > index.html")
    started = await run("terminal", command=SERVER.format(port=port), background=True)
    assert started["status"] == "running" and started["session_id"].startswith("proc_"), started
    assert await eventually(lambda: listening(port)), "the server never listened"
    fetched = await run("terminal", command=f"curl -s http://127.0.0.1:{port}/index.html")
    assert fetched["output"] == "served\n"  # it started in the shell's directory, sub
    polled = await run("process", action="poll", session_id=started["session_id"])
    assert polled["status"] == "running" and "GET /index.html" in polled["new_output"]
    pid = started["pid"]
    run.close()  # the session closes
    assert await eventually(lambda: not listening(port)), "the server outlived its session"
    assert await eventually(lambda: start_time(pid) is None)


async def test_poll_log_wait_and_input(tmp_path: Path) -> None:
    run = Tools(LocalWorkspace(project(tmp_path)))
    await run("terminal", command="export WHO=agent")
    proc = await run("terminal", command='echo "hi $WHO"; read a; echo "got $a"; cat; echo done',
                     background=True)
    sid = proc["session_id"]
    assert (await run("process", action="submit", session_id=sid, data="one"))["bytes_written"] == 4
    await run("process", action="write", session_id=sid, data="raw")
    waited = await run("process", action="wait", session_id=sid, timeout=1)
    assert waited["status"] == "timeout" and "still running" in waited["note"]
    assert "hi agent\ngot one\n" in waited["output"]  # partial output on timeout
    assert (await run("process", action="close", session_id=sid))["status"] == "ok"
    done = await run("process", action="wait", session_id=sid, timeout=10)
    assert done["status"] == "exited" and done["exit_code"] == 0
    assert done["output"].endswith("done\n")  # new since the last wait
    log = await run("process", action="log", session_id=sid)
    assert log["output"] == "hi agent\ngot one\nrawdone" and log["total_lines"] == 3
    page = await run("process", action="log", session_id=sid, offset=1, limit=1)
    assert page["output"] == "got one"
    listed = (await run("process", action="list"))["processes"]
    assert [(p["session_id"], p["status"], p["exit_code"]) for p in listed] == [(sid, "exited", 0)]
    run.close()


async def test_kill_and_what_an_ended_process_answers(tmp_path: Path) -> None:
    run = Tools(LocalWorkspace(project(tmp_path)))
    sid = (await run("terminal", command="trap '' TERM; sleep 300 & wait", background=True))["session_id"]
    killed = await run("process", action="kill", session_id=sid)  # TERM ignored: KILL follows
    assert killed["status"] == "killed"
    assert (await run("process", action="kill", session_id=sid))["status"] == "already_exited"
    written = await run("process", action="write", session_id=sid, data="x")
    assert written["status"] == "already_exited" and "ended" in written["error"]
    waited = await run("process", action="wait", session_id=sid)
    assert waited["status"] == "killed"  # no waiting on a dead process
    run.close()


async def test_bad_input_gets_a_clear_result(tmp_path: Path) -> None:
    run = Tools(LocalWorkspace(project(tmp_path)))
    assert (await run("process", action="list")) == {"processes": []}
    assert "no background process was started" in (await run("process", action="poll", session_id="x"))["error"]
    assert "action must be one of" in (await run("process", action="dance"))["error"]
    assert "session_id is required" in (await run("process", action="poll"))["error"]
    sid = (await run("terminal", command="sleep 300", background=True))["session_id"]
    assert f"known: {sid}" in (await run("process", action="poll", session_id="proc_nope"))["error"]
    assert "integers" in (await run("process", action="log", session_id=sid, limit="many"))["error"]
    assert "not found" in (await run("terminal", command="true", background=True, workdir="nowhere"))["error"]
    closed = await run("process", action="close", session_id=sid)
    assert closed["status"] == "ok"
    again = await run("process", action="write", session_id=sid, data="x")
    assert "stdin is closed" in again["error"]
    assert [p["status"] for p in (await run("process", action="list"))["processes"]] == ["running"]
    run.close()


async def test_at_most_max_running_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(table, "MAX_RUNNING", 2)
    run = Tools(LocalWorkspace(project(tmp_path)))
    first = await run("terminal", command="sleep 300", background=True)
    await run("terminal", command="sleep 300", background=True)
    refused = await run("terminal", command="sleep 300", background=True)
    assert "2 background processes are running already" in refused["error"]
    await run("process", action="kill", session_id=first["session_id"])
    assert (await run("terminal", command="sleep 300", background=True))["status"] == "running"
    run.close()


async def test_output_past_the_bounds_is_counted_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "LOG_FILE_BYTES", 5000)
    monkeypatch.setattr(base, "TAIL_BYTES", 1000)
    monkeypatch.setattr(process_tool, "POLL_BYTES", 300)
    run = Tools(LocalWorkspace(project(tmp_path)))
    sid = (await run("terminal", command="seq 1 3000", background=True))["session_id"]
    await run("process", action="wait", session_id=sid)
    entry = run.state.processes.get(sid)  # type: ignore[union-attr]
    assert entry.proc.log.total == len("".join(f"{i}\n" for i in range(1, 3001)))
    assert entry.proc.log.saved == 5000 and os.path.getsize(entry.proc.log.path) == 5000
    entry.polled = 0
    polled = await run("process", action="poll", session_id=sid)
    assert polled["new_output"].endswith("2999\n3000\n") and len(polled["new_output"]) == 300
    assert polled["skipped_bytes"] == entry.proc.log.total - 300
    log = await run("process", action="log", session_id=sid, offset=0, limit=3)
    assert log["output"] == "1\n2\n3" and "was not kept" in log["note"]
    run.close()


async def test_notify_on_complete_tells_once(tmp_path: Path) -> None:
    run = Tools(LocalWorkspace(project(tmp_path)))
    told: list[str] = []

    async def announce(text: str) -> None:
        told.append(text)

    run.state.announce = announce
    sid = (await run("terminal", command="echo built; exit 4", background=True,
                     notify_on_complete=True))["session_id"]
    quiet = (await run("terminal", command="sleep 300", background=True))["session_id"]
    assert await eventually(lambda: bool(told))
    [note] = run.state.processes.take_notes()  # type: ignore[union-attr]
    assert note.startswith(f"[Background process {sid} (`echo built; exit 4`) ended with exit code 4.")
    assert "built" in note
    assert told == [note.splitlines()[0]]
    await run("process", action="kill", session_id=quiet)  # killed by the model: no notice
    assert run.state.processes.take_notes() == []  # type: ignore[union-attr]
    run.close()
