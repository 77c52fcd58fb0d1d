"""`talaria acp` driven by the official ACP Python SDK's client (agent-client-protocol).

The SDK parses every message into its pydantic models, so anything Talaria sends that the
reference implementation would reject fails here too. Covers fs reads (an unsaved buffer)
and writes, an editor terminal, permission requests and a cancel.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import acp
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    FileSystemCapabilities,
    KillTerminalResponse,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

from tests.acp_harness import SERVER_CMD, server_env

LINE_LIMIT = 64 * 1024 * 1024


class SdkEditor:
    """An ACP `Client`: buffers in memory, real terminal processes, permissions allowed."""

    def __init__(self) -> None:
        self.buffers: dict[str, str] = {}
        self.writes: list[tuple[str, str]] = []
        self.updates: list[Any] = []
        self.permissions: list[Any] = []
        self.terminals: dict[str, subprocess.Popen[bytes]] = {}
        self.released: list[str] = []

    async def request_permission(self, options: list[Any], session_id: str, tool_call: Any, **kw: Any):
        self.permissions.append(tool_call)
        allow = next(o for o in options if o.kind == "allow_once")
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=allow.option_id))

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        self.updates.append(update)

    async def read_text_file(self, path: str, session_id: str, **kw: Any) -> ReadTextFileResponse:
        return ReadTextFileResponse(content=self.buffers.get(path) or Path(path).read_text())

    async def write_text_file(self, content: str, path: str, session_id: str, **kw: Any) -> WriteTextFileResponse:
        self.writes.append((path, content))
        self.buffers[path] = content
        return WriteTextFileResponse()

    async def create_terminal(self, command: str, session_id: str, args: list[str] | None = None,
                              cwd: str | None = None, **kw: Any) -> CreateTerminalResponse:
        terminal_id = f"t{len(self.terminals) + 1}"
        self.terminals[terminal_id] = subprocess.Popen(
            [command, *(args or [])], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **kw: Any) -> WaitForTerminalExitResponse:
        proc = self.terminals[terminal_id]
        while proc.poll() is None:
            await asyncio.sleep(0.01)
        return WaitForTerminalExitResponse(exit_code=proc.returncode if proc.returncode >= 0 else None)

    async def terminal_output(self, session_id: str, terminal_id: str, **kw: Any) -> TerminalOutputResponse:
        proc = self.terminals[terminal_id]
        done = proc.poll() is not None
        output = proc.stdout.read().decode() if done and proc.stdout else ""
        return TerminalOutputResponse(output=output, truncated=False)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kw: Any) -> KillTerminalResponse:
        self._kill(terminal_id)
        return KillTerminalResponse()

    async def release_terminal(self, session_id: str, terminal_id: str, **kw: Any) -> ReleaseTerminalResponse:
        self._kill(terminal_id)
        self.released.append(terminal_id)
        return ReleaseTerminalResponse()

    def _kill(self, terminal_id: str) -> None:
        proc = self.terminals[terminal_id]
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise acp.RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        pass

    def on_connect(self, conn: Any) -> None:
        pass

    def kinds(self) -> list[str]:
        return [u.session_update for u in self.updates]


async def until(predicate: Any) -> None:
    while not predicate():
        await asyncio.sleep(0.01)


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def test_the_official_sdk_client_drives_a_whole_session(tmp_path: Path, fake_llm) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.py").write_text("on disk\n")
    fake_llm.script([
        {"reasoning": "Look first.", "tool_calls": [call("read_file", path="a.py")]},
        {"tool_calls": [call("write_file", path="b.py", content="B = 1\n")]},
        {"tool_calls": [call("terminal", command="echo sdk-terminal")]},
        {"text": "All done."},
        {"tool_calls": [call("terminal", command="sleep 30")]},
    ])
    editor = SdkEditor()
    editor.buffers[str(project / "a.py")] = "unsaved buffer\n"
    command, *args = SERVER_CMD

    async def main() -> None:
        async with acp.spawn_agent_process(
            editor, command, *args, env=server_env(tmp_path / "home", fake_llm), cwd=project,
            transport_kwargs={"limit": LINE_LIMIT, "stderr": subprocess.DEVNULL},  # logs: TALARIA_HOME
        ) as (conn, process):
            init = await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True))
            assert init.protocol_version == 1 and init.agent_capabilities.load_session
            session = await conn.new_session(cwd=str(project))
            assert session.modes.current_mode_id == "default"

            done = await asyncio.wait_for(conn.prompt(session_id=session.session_id,
                                                      prompt=[acp.text_block("Fix it")]), 10)
            assert done.stop_reason == "end_turn"

            running = asyncio.ensure_future(conn.prompt(session_id=session.session_id,
                                                        prompt=[acp.text_block("Now wait")]))
            await asyncio.wait_for(until(lambda: len(editor.terminals) == 2), 10)  # `sleep 30` runs
            await conn.cancel(session_id=session.session_id)
            cancelled = await asyncio.wait_for(running, 2)
            assert cancelled.stop_reason == "cancelled"

            listed = await conn.list_sessions(cwd=str(project))
            assert [s.session_id for s in listed.sessions] == [session.session_id]

        assert process.returncode == 0

    asyncio.run(main())
    assert editor.writes == [(str(project / "b.py"), "B = 1\n")] and not (project / "b.py").exists()
    assert "unsaved buffer" in str(fake_llm.requests[1]["json"]["messages"])
    assert "sdk-terminal" in str(fake_llm.requests[3]["json"]["messages"])
    assert len(editor.permissions) == 3  # the write and both commands
    assert sorted(editor.released) == ["t1", "t2"]
    assert all(p.poll() is not None for p in editor.terminals.values())
    kinds = editor.kinds()
    for kind in ("available_commands_update", "agent_thought_chunk", "tool_call", "tool_call_update",
                 "agent_message_chunk", "usage_update", "session_info_update"):
        assert kind in kinds, kind
    finals = [u for u in editor.updates if u.session_update == "tool_call_update" and u.status in ("completed", "failed")]
    starts = [u for u in editor.updates if u.session_update == "tool_call"]
    assert len(finals) == len(starts) == 4
    assert finals[-1].status == "failed"  # the cancelled command


def test_sdk_client_without_credentials_gets_auth_required(tmp_path: Path) -> None:
    command, *args = SERVER_CMD

    async def main() -> None:
        async with acp.spawn_agent_process(
            SdkEditor(), command, *args, env=server_env(tmp_path / "home", credentials=False), cwd=tmp_path,
            transport_kwargs={"stderr": subprocess.DEVNULL},
        ) as (conn, _):
            init = await conn.initialize(protocol_version=1)
            assert init.auth_methods[-1].id == "environment"  # every client can use it
            try:
                await conn.new_session(cwd=str(tmp_path))
            except acp.RequestError as exc:
                assert exc.code == -32000
            else:
                raise AssertionError("session/new succeeded without credentials")

    asyncio.run(main())
