"""`AcpClient` drives a real `talaria acp` child process, as the editor, against the fake LLM.

Every line both ways is traced and held to the official ACP schema at the end of each test.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from talaria.acp_server.client.core import AcpClient, Write, allow_all, reject_all
from talaria.acp_server.jsonrpc import RpcError
from tests.acpschema import Recorder, check
from tests.fakellm import FakeLLM

SCRUBBED = ("OPENAI_", "ANTHROPIC_", "OPENROUTER_", "TALARIA_")
IDLE_AGENT = [sys.executable, "-c", "import sys; sys.stderr.write('agent says hi\\n'); sys.stdin.read()"]


def agent_env(home: Path, llm: FakeLLM | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED)}
    env["TALARIA_HOME"] = str(home)
    if llm is not None:
        env.update(TALARIA_MODEL="openai:fake", OPENAI_API_KEY="x", OPENAI_BASE_URL=llm.openai_base_url)
    return {**env, **extra}


class Trace:
    """Keeps every line; `validate()` checks the whole conversation against the schema."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, bytes]] = []

    def __call__(self, direction: str, line: bytes) -> None:
        self.lines.append((direction, line))

    def validate(self) -> Recorder:
        recorder = Recorder()
        for direction, line in self.lines:
            recorder.record(direction, line)  # type: ignore[arg-type]
        assert not recorder.unanswered(), recorder.unanswered()
        return recorder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("hello world\n")
    return root


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def tool_results(llm: FakeLLM) -> list[str]:
    """The tool results the model saw in its last request."""
    return [m["content"] for m in llm.requests[-1]["json"]["messages"] if m["role"] == "tool"]


def test_a_multi_turn_task_goes_through_the_editor_path_and_can_be_reloaded(
    fake_llm: FakeLLM, project: Path, tmp_path: Path
) -> None:
    fake_llm.script([
        call("read_file", path="notes.txt"),
        call("patch", path="notes.txt", old_string="hello", new_string="goodbye"),
        call("write_file", path="new.txt", content="fresh\n"),
        call("terminal", command="cat notes.txt new.txt; echo exit-$((6*7))"),
        {"text": "All done."},
        {"text": "You are welcome."},
    ])
    seen: list[tuple[str, dict[str, Any]]] = []
    trace = Trace()

    async def main() -> tuple[str, str, str, AcpClient]:
        async with AcpClient(env=agent_env(tmp_path / "home", fake_llm), cwd=project,
                             permission=allow_all, on_update=lambda s, u: seen.append((s, u)),
                             trace=trace) as client:
            info = await client.initialize()
            assert info["protocolVersion"] == 1 and info["agentInfo"]["name"] == "talaria"
            session = await client.open_session(project)
            first = await client.prompt(session, "Change hello to goodbye")
            second = await client.prompt(session, [{"type": "text", "text": "Thanks"}])
            return session, first, second, client

    session, first, second, client = anyio.run(main)
    assert (first, second) == ("end_turn", "end_turn")
    assert client.writes == [
        Write(session, str(project / "notes.txt"), "goodbye world\n"),
        Write(session, str(project / "new.txt"), "fresh\n"),
    ]
    assert (project / "notes.txt").read_text() == "goodbye world\n"
    assert client.calls["fs/read_text_file"] >= 1
    assert client.calls["session/request_permission"] == 3  # patch, write_file, terminal
    assert client.calls["terminal/create"] == client.calls["terminal/release"] == 1
    assert client.process is not None and client.process.returncode is not None
    terminal_result = json.loads(fake_llm.requests[4]["json"]["messages"][-1]["content"])
    assert terminal_result["exit_code"] == 0
    assert "goodbye world\nfresh\nexit-42" in terminal_result["output"]
    assert seen == client.updates and all(s == session for s, _ in seen)
    text = "".join(u["content"]["text"] for _, u in seen if u["sessionUpdate"] == "agent_message_chunk")
    assert text.endswith("All done.You are welcome.")
    embedded = [c for _, u in seen for c in u.get("content") or () if isinstance(c, dict)
                and c.get("type") == "terminal"]
    assert embedded, "the terminal is embedded in its tool call"
    trace.validate()

    # A second editor (a new agent process) finds the session, reloads it and switches its mode.
    async def reopen() -> AcpClient:
        async with AcpClient(env=agent_env(tmp_path / "home", fake_llm), permission=reject_all,
                             trace=trace) as client:
            await client.initialize(fs=False, terminal=False)
            listed = await client.list_sessions(cwd=project)
            assert [s["sessionId"] for s in listed["sessions"]] == [session]
            await client.load_session(session, project)
            await client.set_mode(session, "plan")
            with pytest.raises(RpcError) as info:
                await client.set_mode(session, "no-such-mode")
            assert info.value.code == -32602
            return client

    trace = Trace()
    client = anyio.run(reopen)
    users = [u["content"]["text"] for _, u in client.updates if u["sessionUpdate"] == "user_message_chunk"]
    assert users == ["Change hello to goodbye", "Thanks"]
    assert [u["currentModeId"] for _, u in client.updates
            if u["sessionUpdate"] == "current_mode_update"] == ["plan"]
    trace.validate()


def test_without_the_terminal_capability_the_agent_runs_commands_itself(
    fake_llm: FakeLLM, project: Path, tmp_path: Path
) -> None:
    fake_llm.script([call("terminal", command="echo ran-$((2+3)) in $(pwd)"), {"text": "ok"}])

    async def main() -> AcpClient:
        async with AcpClient(env=agent_env(tmp_path / "home", fake_llm), permission=allow_all) as client:
            await client.initialize(terminal=False)
            session = await client.open_session(project)
            assert await client.prompt(session, "run it") == "end_turn"
            return client

    client = anyio.run(main)
    assert not any(method.startswith("terminal/") for method in client.calls)
    assert client.calls["session/request_permission"] == 1
    assert f"ran-5 in {project}" in json.loads(tool_results(fake_llm)[0])["output"]


def test_a_rejected_edit_leaves_the_file_alone(fake_llm: FakeLLM, project: Path, tmp_path: Path) -> None:
    fake_llm.script([call("patch", path="notes.txt", old_string="hello", new_string="HACKED"),
                     {"text": "Understood."}])
    asked: list[dict[str, Any]] = []

    async def policy(params: dict[str, Any]) -> str | None:
        asked.append(params)
        return await reject_all(params)

    async def main() -> AcpClient:
        async with AcpClient(env=agent_env(tmp_path / "home", fake_llm), permission=policy) as client:
            await client.initialize()
            session = await client.open_session(project)  # mode "default": edits ask
            assert await client.prompt(session, "edit it") == "end_turn"
            return client

    client = anyio.run(main)
    assert (project / "notes.txt").read_text() == "hello world\n"
    assert client.writes == [] and client.calls["fs/write_text_file"] == 0
    assert [a["toolCall"]["title"] for a in asked] == ["Edit notes.txt"]
    finals = [u for _, u in client.updates if u.get("status") in ("completed", "failed")]
    assert [u["status"] for u in finals] == ["failed"]
    assert "rejected" in json.loads(tool_results(fake_llm)[0])["error"]


def test_cancel_kills_the_running_terminal_and_the_next_turn_works(
    fake_llm: FakeLLM, project: Path, tmp_path: Path
) -> None:
    fake_llm.script([call("terminal", command="echo $$ > shell.pid; sleep 30"), {"text": "Next."}])

    async def main() -> tuple[str, float, AcpClient]:
        async with AcpClient(env=agent_env(tmp_path / "home", fake_llm), permission=allow_all) as client:
            await client.initialize()
            session = await client.open_session(project)
            started = time.monotonic()
            async with anyio.create_task_group() as tg:
                async def cancel_when_running() -> None:
                    while not (project / "shell.pid").exists() or not client.terminals.open_ids:
                        await anyio.sleep(0.02)
                    await client.cancel(session)

                tg.start_soon(cancel_when_running)
                reason = await client.prompt(session, "sleep")
            elapsed = time.monotonic() - started
            assert client.terminals.open_ids == []  # the agent released it
            assert await client.prompt(session, "again") == "end_turn"
            return reason, elapsed, client

    reason, elapsed, client = anyio.run(main)
    assert reason == "cancelled" and elapsed < 10
    assert client.calls["terminal/kill"] + client.calls["terminal/release"] >= 1
    pid = int((project / "shell.pid").read_text())
    assert not _alive(pid)


def test_cancel_answers_a_pending_permission_question_cancelled(
    fake_llm: FakeLLM, project: Path, tmp_path: Path
) -> None:
    fake_llm.script([call("write_file", path="x.txt", content="x")])
    asking = anyio.Event()
    trace = Trace()

    async def never_answers(params: dict[str, Any]) -> str | None:
        asking.set()
        await anyio.sleep_forever()
        return None

    async def main() -> str:
        async with AcpClient(env=agent_env(tmp_path / "home", fake_llm), permission=never_answers,
                             trace=trace) as client:
            await client.initialize()
            session = await client.open_session(project)
            async with anyio.create_task_group() as tg:
                async def cancel_when_asked() -> None:
                    await asking.wait()
                    await client.cancel(session)

                tg.start_soon(cancel_when_asked)
                with anyio.fail_after(10):
                    return await client.prompt(session, "write")
        raise AssertionError("unreachable")

    assert anyio.run(main) == "cancelled"
    assert not (project / "x.txt").exists()
    trace.validate()


def test_client_methods_fs_and_terminals(tmp_path: Path) -> None:
    (tmp_path / "lines.txt").write_text("one\ntwo\nthree\nfour\n")
    log = tmp_path / "agent.log"

    async def main() -> tuple[AcpClient, int]:
        async with AcpClient(IDLE_AGENT, permission=reject_all, stderr=log) as client:
            read = client.read_text_file
            path = str(tmp_path / "lines.txt")
            assert await read({"sessionId": "s", "path": path}) == {"content": "one\ntwo\nthree\nfour\n"}
            part = await read({"sessionId": "s", "path": path, "line": 2, "limit": 2})
            assert part == {"content": "two\nthree\n"}
            check("ReadTextFileResponse", part)
            for params, code in (({"path": str(tmp_path / "missing")}, -32002), ({"path": "rel.txt"}, -32602)):
                with pytest.raises(RpcError) as info:
                    await read({"sessionId": "s", **params})
                assert info.value.code == code
            written = await client.write_text_file(
                {"sessionId": "s", "path": str(tmp_path / "sub" / "new.txt"), "content": "é\n"})
            check("WriteTextFileResponse", written)
            assert (tmp_path / "sub" / "new.txt").read_text() == "é\n"
            assert client.writes == [Write("s", str(tmp_path / "sub" / "new.txt"), "é\n")]

            terms = client.terminals
            created = await terms.create({"sessionId": "s", "command": "sh", "cwd": str(tmp_path),
                                          "args": ["-c", "printf 'aé%.0s' $(seq 50); exit 3"],
                                          "env": [{"name": "X", "value": "1"}],
                                          "outputByteLimit": 10})
            check("CreateTerminalResponse", created)
            status = await terms.wait_for_exit(created)
            assert status == {"exitCode": 3, "signal": None}
            check("WaitForTerminalExitResponse", status)
            output = await terms.output(created)
            check("TerminalOutputResponse", output)
            assert output["truncated"] and output["output"].endswith("aé")
            assert len(output["output"].encode()) <= 10 and "\ufffd" not in output["output"]
            await terms.release(created)
            with pytest.raises(RpcError) as info:
                await terms.output(created)
            assert info.value.code == -32002

            sleeper = await terms.create({"sessionId": "s", "command": "sleep", "args": ["30"]})
            await terms.kill(sleeper)
            assert (await terms.wait_for_exit(sleeper))["signal"] == "SIGTERM"
            await terms.release(sleeper)
            leftover = await terms.create({"sessionId": "s", "command": "sleep", "args": ["30"]})
            pid = terms._terminals[leftover["terminalId"]].proc.pid
            return client, pid

    started = time.monotonic()
    client, leftover_pid = anyio.run(main)
    assert time.monotonic() - started < 8
    assert client.process is not None and client.process.returncode == 0  # it saw stdin close
    assert not _alive(leftover_pid), "terminals left running are killed when the client exits"
    assert "agent says hi" in log.read_text()


def test_an_agent_that_ignores_eof_is_terminated(tmp_path: Path) -> None:
    stubborn = [sys.executable, "-c", "import signal, time; time.sleep(30)"]

    async def main() -> AcpClient:
        async with AcpClient(stubborn, exit_grace=0.2) as client:
            pass
        return client

    started = time.monotonic()
    client = anyio.run(main)
    assert time.monotonic() - started < 5
    assert client.process is not None and client.process.returncode is not None


def test_an_agent_error_surfaces_as_rpc_error(tmp_path: Path, project: Path) -> None:
    async def main() -> None:
        async with AcpClient(env=agent_env(tmp_path / "home")) as client:  # no model configured
            await client.initialize()
            await client.open_session(project)

    with pytest.raises(RpcError) as info:
        anyio.run(main)
    assert info.value.code == -32000 and "talaria setup" in str(info.value.data)


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not count: init here may never reap it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (FileNotFoundError, ProcessLookupError):
        return False
