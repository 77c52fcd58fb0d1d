"""`talaria lsp` requests: work-done progress and its cancel, talaria.cancel and
$/cancelRequest, permissions over window/showMessageRequest, sessions, code actions, the
transcript opened with window/showDocument, and bad input answered with LSP errors."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anyio
import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from talaria.agent.store import Store
from tests.fakellm import FakeLLM
from tests.lsp.lsp_editor import TIMEOUT, LspEditor, capabilities, lsp_editor
from tests.lsp.test_lsp_door import call, last_tool_result, span

pytestmark = pytest.mark.asyncio
STALL = {"fault": "stall", "after_chunks": 1, "text": "Thinking"}


async def until(check: Any) -> None:
    with anyio.fail_after(TIMEOUT):
        while not check():
            await asyncio.sleep(0.01)


def begun(ed: LspEditor) -> bool:
    return any(v.get("kind") == "begin" for vs in ed.progress().values() for v in vs)


async def test_progress_begins_reports_and_ends_with_a_summary(
        tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script([
        {"tool_calls": [call("patch", path="a.py", old_string="x = 1", new_string="x = 2")]},
        {"text": "Changed x."},
    ])
    async with lsp_editor(tmp_path, fake_llm) as ed:
        ed.open("a.py", "x = 1\n")
        await ed.command("talaria.ask", "Set x to 2")
        [(token, values)] = ed.progress().items()
        logs = [m.message for m in ed.client.log_messages]
        shown = ed.client.shown_documents
    assert [v["kind"] for v in values][0] == "begin" and values[-1]["kind"] == "end"
    assert values[0]["cancellable"] is True and values[0]["message"] == "Ask: Set x to 2"
    assert any(v["kind"] == "report" and "a.py" in v.get("message", "") for v in values)
    assert "end turn" in values[-1]["message"] and "edited a.py" in values[-1]["message"]
    assert any(m.startswith("Talaria: Ask: Set x to 2: end turn") for m in logs), logs
    [doc] = shown
    transcript = Path(doc.uri.removeprefix("file://"))
    assert transcript.name.endswith(".md") and "Changed x." in transcript.read_text()
    line = doc.selection.start.line
    assert transcript.read_text().splitlines()[line] == "Changed x."


async def test_cancelling_the_progress_stops_the_turn(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script([STALL, {"text": "Next."}])
    async with lsp_editor(tmp_path, fake_llm) as ed:
        running = asyncio.ensure_future(ed.command("talaria.ask", "Think hard"))
        await until(lambda: begun(ed))
        [token] = ed.progress()
        ed.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
        result = await running
        after = await ed.command("talaria.ask", "Again")
    assert result["stopReason"] == "cancelled" and after["answer"] == "Next."


async def test_talaria_cancel_stops_the_running_request(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script([STALL])
    async with lsp_editor(tmp_path, fake_llm) as ed:
        assert await ed.command("talaria.cancel") == {"cancelled": False}
        running = asyncio.ensure_future(ed.command("talaria.ask", "Think hard"))
        await until(lambda: begun(ed))
        with pytest.raises(JsonRpcException, match="still working"):
            await ed.command("talaria.ask", "Me too")  # one request at a time
        assert await ed.command("talaria.cancel") == {"cancelled": True}
        result = await running
    assert result["stopReason"] == "cancelled"


async def test_cancel_request_stops_the_turn(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script([STALL, {"text": "Next."}])
    async with lsp_editor(tmp_path, fake_llm) as ed:
        params = types.ExecuteCommandParams(command="talaria.ask", arguments=["Think hard"])
        running = asyncio.ensure_future(ed.client.protocol.send_request_async(
            types.WORKSPACE_EXECUTE_COMMAND, params, msg_id="ask-1"))
        await until(lambda: begun(ed))
        # By hand: pygls' client cancels its own future first, then chokes on the answer.
        ed.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="ask-1"))
        with anyio.fail_after(TIMEOUT):
            result = await running
        after = await ed.command("talaria.ask", "Again")
    assert result["stopReason"] == "cancelled" and after["answer"] == "Next."


async def test_new_session_starts_a_fresh_conversation(tmp_path: Path, fake_llm: FakeLLM) -> None:
    async with lsp_editor(tmp_path, fake_llm) as ed:
        first = await ed.command("talaria.ask", "One")
        second = await ed.command("talaria.ask", "Two")
        fresh = await ed.command("talaria.newSession")
        third = await ed.command("talaria.ask", "Three")
    assert first["sessionId"] == second["sessionId"] != fresh["sessionId"] == third["sessionId"]
    users = [[m for m in r["json"]["messages"] if m["role"] == "user"] for r in fake_llm.requests]
    assert [len(u) for u in users] == [1, 2, 1]
    store = Store(tmp_path / "home" / "sessions.db")  # the same SQLite store as ACP sessions
    try:
        stored = {record.id for record in store.list_sessions()}
        assert {first["sessionId"], third["sessionId"]} <= stored
        assert len([m for m in store.messages(first["sessionId"]) if m["role"] == "user"]) == 2
    finally:
        store.close()


@pytest.mark.parametrize("answer, applied", [("Allow once", True), ("Reject", False), (None, False)])
async def test_edits_ask_with_show_message_request(tmp_path: Path, fake_llm: FakeLLM,
                                                   answer: str | None, applied: bool) -> None:
    fake_llm.script([
        {"tool_calls": [call("patch", path="a.py", old_string="x = 1", new_string="x = 2")]},
        {"text": "Done."},
    ])
    async with lsp_editor(tmp_path, fake_llm) as ed:
        uri = ed.open("a.py", "x = 1\n")
        ed.answer = answer
        result = await ed.command("talaria.ask", "Set x to 2")
        assert (ed.buffers[uri] == "x = 2\n") is applied
    [question] = ed.questions
    assert "a.py" in question["message"]
    assert [a["title"] for a in question["actions"]] == ["Allow once", "Always allow", "Reject"]
    assert result["edited"] == (["a.py"] if applied else [])


async def test_always_allow_is_not_asked_again(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script([
        {"tool_calls": [call("patch", path="a.py", old_string="x = 1", new_string="x = 2")]},
        {"tool_calls": [call("patch", path="a.py", old_string="x = 2", new_string="x = 3")]},
        {"text": "Done."},
    ])
    async with lsp_editor(tmp_path, fake_llm) as ed:
        uri = ed.open("a.py", "x = 1\n")
        ed.answer = "Always allow"
        await ed.command("talaria.ask", "Set x to 3")
        assert ed.buffers[uri] == "x = 3\n"
    assert len(ed.questions) == 1


@pytest.mark.parametrize("caps_name", ["emacs", "neovim", None])
async def test_every_client_is_asked_whatever_it_advertises(
        tmp_path: Path, fake_llm: FakeLLM, caps_name: str | None) -> None:
    """Eglot advertises no `window.showMessage` (it only describes message action items) yet
    answers `window/showMessageRequest`, a base request: it is asked, as Neovim and VS Code
    are (pytest-lsp's Emacs, Neovim and VS Code capability sets)."""
    fake_llm.script([
        {"tool_calls": [call("patch", path="a.py", old_string="x = 1", new_string="x = 2")]},
        {"text": "Done."},
    ])
    caps = capabilities(caps_name) if caps_name else capabilities(show_message=False)
    async with lsp_editor(tmp_path, fake_llm, caps=caps) as ed:
        uri = ed.open("a.py", "x = 1\n")
        await ed.command("talaria.ask", "Set x to 2")
        assert ed.buffers[uri] == "x = 2\n"
    assert len(ed.questions) == 1


@pytest.mark.parametrize("mode, applied", [(None, False), ("accept_edits", True)])
async def test_a_client_that_cannot_ask_gets_the_configured_mode_never_a_hang(
        tmp_path: Path, fake_llm: FakeLLM, mode: str | None, applied: bool) -> None:
    """Its showMessageRequest fails: that call is refused as unasked (saying what would allow
    it), and the session goes on in `lsp_unattended_mode` without asking again."""
    patch = {"tool_calls": [call("patch", path="a.py", old_string="x = 1", new_string="x = 2")]}
    fake_llm.script([patch, {"text": "Could not."}, patch, {"text": "Done."}])
    env = {"TALARIA_LSP_UNATTENDED_MODE": mode} if mode else {}
    async with lsp_editor(tmp_path, fake_llm, caps=capabilities(show_message=False), env=env) as ed:
        ed.answer = "error"
        uri = ed.open("a.py", "x = 1\n")
        first = await ed.command("talaria.ask", "Set x to 2")
        refused = last_tool_result(fake_llm, 1)
        result = await ed.command("talaria.ask", "Try again")
        assert (ed.buffers[uri] == "x = 2\n") is applied
    assert len(ed.questions) == 1 and first["stopReason"] == result["stopReason"] == "end_turn"
    assert "could not ask" in refused and "user rejected" not in refused
    if not applied:
        assert "dont_ask" in last_tool_result(fake_llm, 3)


async def test_code_actions_on_diagnostics_and_selections(tmp_path: Path, fake_llm: FakeLLM) -> None:
    diagnostic = {"range": span(0, 0), "message": "undefined name 'y'", "severity": 1}
    async with lsp_editor(tmp_path, fake_llm) as ed:
        uri = ed.open("e.py", "x = y\nz = 1\n")
        on_diagnostic = await ed.code_actions(uri, span(0, 0), [diagnostic])
        cursor = {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 0}}
        nothing = await ed.code_actions(uri, cursor)
        actions = {a["title"]: a for a in on_diagnostic}
        assert set(actions) == {"Fix with Talaria", "Ask Talaria about this", "Refactor with Talaria"}
        fix = actions["Fix with Talaria"]
        assert fix["kind"] == "quickfix" and fix["diagnostics"][0]["message"] == "undefined name 'y'"
        # The editor runs the command the action carries, arguments as given.
        result = await ed.command(fix["command"]["command"], *fix["command"]["arguments"])
        refactor = actions["Refactor with Talaria"]["command"]
        await ed.command(refactor["command"], *refactor["arguments"])
    assert nothing == []
    assert result["stopReason"] == "end_turn"
    fix_prompt = str(fake_llm.requests[0]["json"]["messages"][-1]["content"])
    assert "undefined name 'y'" in fix_prompt
    assert "Refactor this code" in str(fake_llm.requests[1]["json"]["messages"][-1]["content"])


@pytest.mark.parametrize("command, args, message", [
    ("talaria.nope", [], "unknown command 'talaria.nope'"),
    ("talaria.ask", [], "needs a prompt"),
    ("talaria.ask", [42], "must be the prompt"),
    ("talaria.fix", ["not a target"], "needs the code to work on"),
    ("talaria.explain", [{"uri": "file:///nowhere/x.py", "range": span(0, 0)}], "does not exist"),
    ("talaria.explain", [{"uri": "untitled:1", "range": span(0, 0)}], "only file: URIs"),
    ("talaria.fix", [{"uri": "URI", "range": span(7, 7)}], "the range ends on line 9 but e.py has 2"),
    ("talaria.fix", [{"uri": "URI", "range": {"start": 1}}], "`range` must be"),
])
async def test_bad_input_gets_an_lsp_error_and_the_session_survives(
        tmp_path: Path, fake_llm: FakeLLM, command: str, args: list[Any], message: str) -> None:
    async with lsp_editor(tmp_path, fake_llm) as ed:
        uri = ed.open("e.py", "x = y\n")
        args = [{**a, "uri": uri} if isinstance(a, dict) and a.get("uri") == "URI" else a
                for a in args]
        with pytest.raises(JsonRpcException) as raised:
            await ed.command(command, *args)
        after = await ed.command("talaria.ask", "Still there?")
    assert raised.value.code == types.ErrorCodes.InvalidParams
    assert message in raised.value.message, raised.value.message
    assert after["stopReason"] == "end_turn"


async def test_without_a_model_the_request_fails_with_what_to_do(tmp_path: Path) -> None:
    async with lsp_editor(tmp_path, None) as ed:
        with pytest.raises(JsonRpcException) as raised:
            await ed.command("talaria.ask", "Hello?")
    assert raised.value.code == types.LSPErrorCodes.RequestFailed
    assert "talaria setup" in raised.value.message or "TALARIA_MODEL" in raised.value.message


async def test_a_client_that_fails_the_question_is_not_asked_again(
        tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script([
        {"tool_calls": [call("patch", path="a.py", old_string="x = 1", new_string="x = 2")]},
        {"tool_calls": [call("patch", path="a.py", old_string="x = 1", new_string="x = 3")]},
        {"text": "Done."},
    ])

    def broken(params: dict[str, Any]) -> str:
        raise RuntimeError("this editor cannot show choices")

    async with lsp_editor(tmp_path, fake_llm) as ed:
        uri = ed.open("a.py", "x = 1\n")
        ed.answer = broken
        result = await ed.command("talaria.ask", "Set x")
        assert ed.buffers[uri] == "x = 1\n"
    assert len(ed.questions) == 1  # the failure is remembered: refused, never a hang
    assert result["stopReason"] == "end_turn" and result["edited"] == []
