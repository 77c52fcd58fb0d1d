"""`talaria lsp` end to end: document sync, ask / fix / explain, edits through
workspace/applyEdit (open files, files not open, new files, clients that cannot), and the
`talaria/update` stream; a real server process, pytest-lsp's client, the fake LLM."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.acp_harness import server_env
from tests.acpschema import AGENT_TO_CLIENT, validate_message
from tests.fakellm import FakeLLM
from tests.lsp.lsp_editor import capabilities, lsp_editor

pytestmark = pytest.mark.asyncio


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def span(first: int, last: int) -> dict[str, Any]:
    """Lines first..last (0-based, inclusive) as an LSP range."""
    return {"start": {"line": first, "character": 0}, "end": {"line": last + 1, "character": 0}}


def prompt_of(llm: FakeLLM, request: int = 0) -> str:
    messages = llm.requests[request]["json"]["messages"]
    return str(next(m["content"] for m in reversed(messages) if m["role"] == "user"))


def last_tool_result(llm: FakeLLM, request: int) -> str:
    return str(llm.requests[request]["json"]["messages"][-1])


async def test_read_file_sees_the_unsaved_buffer(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script([{"tool_calls": [call("read_file", path="a.py")]}, {"text": "It sets x."}])
    async with lsp_editor(tmp_path, fake_llm) as ed:
        (ed.root / "a.py").write_text("x = 'on disk'\n")
        uri = ed.open("a.py")
        ed.change(uri, "x = 'unsaved'\n")
        result = await ed.command("talaria.ask", "What is x?")
    assert result["stopReason"] == "end_turn" and result["answer"] == "It sets x."
    assert prompt_of(fake_llm) == "What is x?"  # an editor's plain ["prompt"]
    assert "unsaved" in last_tool_result(fake_llm, 1)
    assert "on disk" not in last_tool_result(fake_llm, 1)


async def test_a_closed_buffer_reads_from_disk_again(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script([{"tool_calls": [call("read_file", path="a.py")]}, {"text": "ok"}])
    async with lsp_editor(tmp_path, fake_llm) as ed:
        (ed.root / "a.py").write_text("x = 'on disk'\n")
        uri = ed.open("a.py")
        ed.change(uri, "x = 'discarded'\n")
        ed.close(uri)
        await ed.command("talaria.ask", "What is x?")
    assert "on disk" in last_tool_result(fake_llm, 1)


async def test_ask_about_a_selection_quotes_it(tmp_path: Path, fake_llm: FakeLLM) -> None:
    async with lsp_editor(tmp_path, fake_llm) as ed:
        uri = ed.open("m.py", "import os\n\ndef f():\n    return 42\n")
        await ed.command("talaria.ask", "Why 42?", {"uri": uri, "range": span(2, 3)})
        await ed.command("talaria.ask", {"prompt": "And now?", "uri": uri, "range": span(0, 0)})
    first, second = prompt_of(fake_llm, 0), prompt_of(fake_llm, 1)
    assert first.startswith("Why 42?") and "m.py:3-4" in first and "return 42" in first
    assert "import os" not in first
    assert second.startswith("And now?") and "import os" in second and "return 42" not in second


async def test_fix_quotes_the_diagnostics_and_explain_does_not_edit(
        tmp_path: Path, fake_llm: FakeLLM) -> None:
    diagnostic = {"range": span(0, 0), "message": "undefined name 'y'", "source": "pyflakes"}
    async with lsp_editor(tmp_path, fake_llm) as ed:
        uri = ed.open("e.py", "x = y\n")
        fixed = await ed.command("talaria.fix", {"uri": uri, "range": span(0, 0),
                                                 "diagnostics": [diagnostic]})
        explained = await ed.command("talaria.explain", {"uri": uri, "range": span(0, 0)})
    assert fixed["stopReason"] == explained["stopReason"] == "end_turn"
    fix, explain = prompt_of(fake_llm, 0), prompt_of(fake_llm, 1)
    assert "undefined name 'y' (pyflakes)" in fix and "e.py line 1" in fix and "x = y" in fix
    assert explain.startswith("Explain") and "Do not edit" in explain and "x = y" in explain
    assert fixed["sessionId"] == explained["sessionId"]


async def test_a_patch_to_an_open_buffer_is_one_versioned_apply_edit(
        tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script([
        {"tool_calls": [call("patch", path="a.py", old_string="x = 1", new_string="x = 2")]},
        {"tool_calls": [call("read_file", path="a.py")]},
        {"text": "Changed x."},
    ])
    async with lsp_editor(tmp_path, fake_llm) as ed:
        (ed.root / "a.py").write_text("x = 0\n")
        uri = ed.open("a.py")
        ed.change(uri, "# unsaved\nx = 1\ny = 3\n")
        result = await ed.command("talaria.ask", "Set x to 2")
        assert ed.buffers[uri] == "# unsaved\nx = 2\ny = 3\n"
    assert (ed.root / "a.py").read_text() == "x = 0\n"  # the editor saves, not Talaria
    assert result["edited"] == ["a.py"] and result["answer"] == "Changed x."
    [edit] = ed.edits
    [change] = edit["edit"]["documentChanges"]
    assert change["textDocument"] == {"uri": uri, "version": 2}
    assert change["edits"] == [{"range": span(1, 1), "newText": "x = 2\n"}]
    assert "x = 2" in last_tool_result(fake_llm, 2)  # the next read sees the edit


async def test_files_not_open_are_edited_and_created_through_the_editor(
        tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script([
        {"tool_calls": [call("patch", path="lib/b.py", old_string="b = 1", new_string="b = 2")]},
        {"tool_calls": [call("write_file", path="lib/new.py", content="n = 1\n")]},
        {"text": "Done."},
    ])
    async with lsp_editor(tmp_path, fake_llm) as ed:
        (ed.root / "lib").mkdir()
        (ed.root / "lib/b.py").write_text("a = 0\nb = 1\n")
        result = await ed.command("talaria.ask", "Edit two files")
        assert ed.buffers[ed.uri("lib/b.py")] == "a = 0\nb = 2\n"
        assert ed.buffers[ed.uri("lib/new.py")] == "n = 1\n"
    assert result["edited"] == ["lib/b.py", "lib/new.py"]
    assert (ed.root / "lib/b.py").read_text() == "a = 0\nb = 1\n"
    assert not (ed.root / "lib/new.py").exists()  # created in the editor, unsaved
    patch, create = (e["edit"]["documentChanges"] for e in ed.edits)
    assert patch[0]["textDocument"]["version"] is None
    assert create[0] == {"kind": "create", "uri": ed.uri("lib/new.py"),
                         "options": {"ignoreIfExists": True}}


async def test_without_resource_operations_a_new_file_goes_to_disk_with_a_notice(
        tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script([{"tool_calls": [call("write_file", path="n.py", content="n = 1\n")]},
                     {"text": "Done."}])
    async with lsp_editor(tmp_path, fake_llm, caps=capabilities(resource_ops=False)) as ed:
        await ed.command("talaria.ask", "Create n.py")
        messages = [m.message for m in ed.client.messages]
    assert (ed.root / "n.py").read_text() == "n = 1\n" and not ed.edits
    assert any("cannot create files" in m and "n.py" in m for m in messages), messages


async def test_without_apply_edit_the_disk_is_written_with_a_notice(
        tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script([
        {"tool_calls": [call("patch", path="a.py", old_string="x = 1", new_string="x = 2")]},
        {"text": "Done."},
    ])
    async with lsp_editor(tmp_path, fake_llm, caps=capabilities(apply_edit=False)) as ed:
        (ed.root / "a.py").write_text("x = 1\n")
        result = await ed.command("talaria.ask", "Set x to 2")
        messages = [m.message for m in ed.client.messages]
    assert (ed.root / "a.py").read_text() == "x = 2\n" and not ed.edits
    assert result["edited"] == ["a.py"]
    assert any("workspace/applyEdit" in m for m in messages), messages


async def test_a_refused_apply_edit_is_a_failed_tool_and_the_session_lives_on(
        tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script([
        {"tool_calls": [call("patch", path="a.py", old_string="x = 1", new_string="x = 2")]},
        {"text": "It was refused."},
        {"text": "Still here."},
    ])
    async with lsp_editor(tmp_path, fake_llm) as ed:
        uri = ed.open("a.py", "x = 1\n")
        ed.refuse_edits = "the document changed"
        first = await ed.command("talaria.ask", "Set x to 2")
        ed.refuse_edits = None
        second = await ed.command("talaria.ask", "Are you there?")
        assert ed.buffers[uri] == "x = 1\n"
    assert "the document changed" in last_tool_result(fake_llm, 1)
    assert first["edited"] == [] and second["answer"] == "Still here."
    assert first["sessionId"] == second["sessionId"]


async def test_talaria_update_is_shaped_like_acp_session_update(
        tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script([
        {"tool_calls": [call("patch", path="a.py", old_string="x = 1", new_string="x = 2")]},
        {"text": "Changed x."},
    ])
    async with lsp_editor(tmp_path, fake_llm) as ed:
        ed.open("a.py", "x = 1\n")
        result = await ed.command("talaria.ask", "Set x to 2")
        updates = list(ed.updates)
    for params in updates:
        assert params["sessionId"] == result["sessionId"]
        validate_message({"jsonrpc": "2.0", "method": "session/update", "params": params},
                         AGENT_TO_CLIENT)
    kinds = [u["update"]["sessionUpdate"] for u in updates]
    assert "tool_call" in kinds and "tool_call_update" in kinds
    assert kinds.index("tool_call") < kinds.index("agent_message_chunk")
    text = "".join(u["update"]["content"]["text"] for u in updates
                   if u["update"]["sessionUpdate"] == "agent_message_chunk")
    assert text == "Changed x."


async def test_slash_commands_run_through_ask(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script([
        {"tool_calls": [call("patch", path="a.py", old_string="x = 1", new_string="x = 2")]},
        {"text": "Planned only."},
    ])
    async with lsp_editor(tmp_path, fake_llm) as ed:
        uri = ed.open("a.py", "x = 1\n")
        switched = await ed.command("talaria.ask", "/mode plan")
        result = await ed.command("talaria.ask", "Set x to 2")
        assert ed.buffers[uri] == "x = 1\n" and not ed.edits and not ed.questions
    assert switched["stopReason"] == "end_turn" and result["edited"] == []
    assert {"sessionUpdate": "current_mode_update", "currentModeId": "plan"} in [
        u["update"] for u in ed.updates]
    assert len(fake_llm.requests) == 2  # the slash command never reached the model


async def test_lsp_sessions_export_as_trajectories(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script([{"text": "It sets x."}])
    async with lsp_editor(tmp_path, fake_llm) as ed:
        result = await ed.command("talaria.ask", "What is x?")
    done = subprocess.run(
        [sys.executable, "-m", "talaria.acp_server", "trajectories", "export", result["sessionId"],
         "--format", "sharegpt"], env=server_env(tmp_path / "home"), capture_output=True,
        text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout.splitlines()[0])
    assert "What is x?" in json.dumps(record) and "It sets x." in json.dumps(record)


async def test_more_workspace_folders_are_part_of_the_project(tmp_path: Path,
                                                              fake_llm: FakeLLM) -> None:
    """The first folder is the project; the others are its additional directories."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "util.py").write_text("LIMIT = 7\n")
    fake_llm.script([{"tool_calls": [call("read_file", path=str(lib / "util.py"))]},
                     {"text": "It is 7."}])
    async with lsp_editor(tmp_path, fake_llm, folders=(lib,)) as ed:
        result = await ed.command("talaria.ask", "What is LIMIT?")
    assert result["stopReason"] == "end_turn" and not ed.questions  # no "outside the project"
    assert "LIMIT = 7" in last_tool_result(fake_llm, 1)
    system = fake_llm.requests[0]["json"]["messages"][0]["content"]
    assert f"Also part of the project (absolute paths reach them): {lib}." in system
