"""A prompt turn end to end: streaming, tool-call cards, the editor's fs and terminal, content.

The fake LLM scripts the model; the harness plays the editor (unsaved buffers, writes kept
in the editor, real terminal processes) and checks every rule of a turn (`check_turn`).
"""

from __future__ import annotations

import base64
from pathlib import Path

from tests.acp_checks import check_turn, final, text_of_requests
from tests.acp_harness import Editor

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def test_streams_text_and_thoughts_then_usage_and_a_title(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"reasoning": "Let me think.", "text": "Hello there, friend."}])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        prompt_id = ed.send_prompt(sid, "Say hello")
        assert ed.result(prompt_id)["stopReason"] == "end_turn"
        check_turn(ed, sid, prompt_id)
        kinds = [u["sessionUpdate"] for u in ed.updates(sid)]
        said = "".join(u["content"]["text"] for u in ed.updates(sid, "agent_message_chunk"))
        thought = "".join(u["content"]["text"] for u in ed.updates(sid, "agent_thought_chunk"))
        usage = ed.updates(sid, "usage_update")[-1]
        (info,) = ed.updates(sid, "session_info_update")
        # A second turn keeps the title.
        ed.prompt(sid, "again")
        assert len(ed.updates(sid, "session_info_update")) == 1
    assert said == "Hello there, friend." and thought == "Let me think."
    assert kinds.index("agent_thought_chunk") < kinds.index("agent_message_chunk") < kinds.index("usage_update")
    assert usage["used"] > 0 and usage["size"] >= usage["used"]
    assert info["title"] == "Say hello"


def test_reads_go_through_the_editor_and_the_model_sees_the_unsaved_buffer(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"tool_calls": [call("read_file", path="a.py")]}, {"text": "ok"}])
    with Editor(tmp_path, fake_llm) as ed:
        target = ed.project / "a.py"
        target.write_text("on disk\n")
        ed.buffers[str(target)] = "unsaved buffer\n"
        ed.initialize()
        sid = ed.new_session()
        prompt_id = ed.send_prompt(sid, "read a.py")
        ed.result(prompt_id)
        (card,) = check_turn(ed, sid, prompt_id).values()
    assert ed.reads == [str(target)]
    assert card[0]["kind"] == "read" and card[0]["locations"] == [{"path": str(target)}]
    assert card[0]["rawInput"] == {"path": "a.py"}
    assert [u.get("status") for u in card] == ["pending", "in_progress", "completed"]
    assert final(card)["content"] == [{"type": "content", "content": {"type": "text", "text": "1|unsaved buffer"}}]
    assert not ed.permission_requests  # reads never ask
    seen = text_of_requests(fake_llm)
    assert "unsaved buffer" in seen and "on disk" not in seen


def test_edits_go_through_the_editor_after_permission_with_diffs(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([
        {"tool_calls": [call("write_file", path="new.py", content="print('new')\n")]},
        {"tool_calls": [call("patch", path="old.py", old_string="x = 1", new_string="x = 2")]},
        {"text": "edited"},
    ])
    with Editor(tmp_path, fake_llm) as ed:
        (ed.project / "old.py").write_text("x = 1\n")
        ed.initialize()
        sid = ed.new_session()
        prompt_id = ed.send_prompt(sid, "edit")
        ed.result(prompt_id)
        cards = check_turn(ed, sid, prompt_id)
    new, old = (str(ed.project / "new.py"), str(ed.project / "old.py"))
    assert ed.writes == [(new, "print('new')\n"), (old, "x = 2\n")]
    # The agent wrote nothing itself: the editor holds the edits for review.
    assert not (ed.project / "new.py").exists() and (ed.project / "old.py").read_text() == "x = 1\n"
    asked = [p["toolCall"]["toolCallId"] for p in ed.permission_requests]
    assert asked == list(cards)  # mode default: every edit asks, on its own card
    assert {o["kind"] for o in ed.permission_requests[0]["options"]} == {
        "allow_once", "allow_always", "reject_once", "reject_always"}
    diffs = [final(card)["content"][0] for card in cards.values()]
    assert diffs[0] == {"type": "diff", "path": new, "oldText": None, "newText": "print('new')\n"}
    assert diffs[1] == {"type": "diff", "path": old, "oldText": "x = 1\n", "newText": "x = 2\n"}
    assert all(card[0]["kind"] == "edit" for card in cards.values())


def test_commands_run_in_the_editors_terminal_which_is_always_released(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([
        {"tool_calls": [call("terminal", command="echo hello-from-terminal")]},
        {"tool_calls": [call("terminal", command="echo oops; exit 3")]},
        {"text": "ran"},
    ])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        prompt_id = ed.send_prompt(sid, "run")
        ed.result(prompt_id)
        cards = check_turn(ed, sid, prompt_id)
        methods = [m["method"] for d, m in ed.transcript() if m.get("method", "").startswith("terminal/")]
    assert len(ed.terminals) == 2 and all(t.released for t in ed.terminals.values())
    assert methods.count("terminal/create") == methods.count("terminal/release") == 2
    assert "terminal/wait_for_exit" in methods and "terminal/output" in methods
    first, second = cards.values()
    assert first[0]["kind"] == "execute"
    embedded = [c for u in first[1:] for c in u.get("content") or () if c["type"] == "terminal"]
    assert embedded and embedded[0]["terminalId"] in ed.terminals
    assert final(first)["status"] == "completed"
    assert {"type": "terminal", "terminalId": embedded[0]["terminalId"]} in final(first)["content"]
    assert final(second)["status"] == "completed"  # a non-zero exit is a result, not a failure
    seen = text_of_requests(fake_llm)
    assert "hello-from-terminal" in seen and '\\"exit_code\\": 3' in seen


def test_without_a_terminal_capability_commands_run_locally(tmp_path: Path, fake_llm) -> None:
    """CodeCompanion-like client: fs only. Reads and writes still go through the editor."""
    fake_llm.script([
        {"tool_calls": [call("terminal", command="echo local-run > out.txt; cat out.txt")]},
        {"tool_calls": [call("write_file", path="w.txt", content="w")]},
        {"text": "ran"},
    ])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize(terminal=False)
        sid = ed.new_session()
        prompt_id = ed.send_prompt(sid, "run")
        ed.result(prompt_id)
        cards = check_turn(ed, sid, prompt_id)
    assert not ed.terminals
    assert not [m for _, m in ed.transcript() if m.get("method", "").startswith("terminal/")]
    assert (ed.project / "out.txt").read_text() == "local-run\n"
    run, write = cards.values()
    assert final(run)["content"][0]["type"] == "content"
    assert "local-run" in final(run)["content"][0]["content"]["text"]
    assert ed.writes == [(str(ed.project / "w.txt"), "w")] and not (ed.project / "w.txt").exists()


def test_without_fs_capabilities_the_agent_uses_the_disk(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"tool_calls": [call("write_file", path="d.txt", content="disk")]}, {"text": "ok"}])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize(fs=False, terminal=False)
        sid = ed.new_session()
        prompt_id = ed.send_prompt(sid, "write")
        ed.result(prompt_id)
        check_turn(ed, sid, prompt_id)
    assert not ed.writes and not ed.reads
    assert (ed.project / "d.txt").read_text() == "disk"


def test_prompt_content_links_embedded_resources_and_images_reach_the_model(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm, env={"TALARIA_MODEL": "openai:gpt-4o"}) as ed:  # a vision model
        linked = ed.project / "linked.py"
        linked.write_text("disk version\n")
        ed.buffers[str(linked)] = "BUFFERED LINK TEXT\n"
        ed.initialize()
        sid = ed.new_session()
        ed.prompt(
            sid,
            "Look at these",
            {"type": "resource_link", "uri": linked.as_uri(), "name": "linked.py"},
            {"type": "resource", "resource": {"uri": (ed.project / "emb.py").as_uri(),
                                              "text": "EMBEDDED TEXT", "mimeType": "text/x-python"}},
            {"type": "image", "mimeType": "image/png", "data": PNG},
        )
    assert ed.reads == [str(linked)]
    (request,) = fake_llm.requests
    user = request["json"]["messages"][-1]
    parts = user["content"]
    texts = " ".join(p.get("text", "") for p in parts if p["type"] == "text")
    assert "Look at these" in texts and "BUFFERED LINK TEXT" in texts and "EMBEDDED TEXT" in texts
    assert "disk version" not in texts
    (image,) = [p for p in parts if p["type"] == "image_url"]
    assert image["image_url"]["url"] == f"data:image/png;base64,{PNG}"


def test_a_plan_from_the_todo_tool_is_sent_as_a_plan_update(tmp_path: Path, fake_llm) -> None:
    todos = [{"id": "1", "content": "Write tests", "status": "in_progress"},
             {"id": "2", "content": "Fix bugs", "status": "pending"}]
    fake_llm.script([{"tool_calls": [call("todo", todos=todos)]}, {"text": "planned"}])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        prompt_id = ed.send_prompt(sid, "plan it")
        ed.result(prompt_id)
        check_turn(ed, sid, prompt_id)
        (plan,) = ed.updates(sid, "plan")
    assert [(e["content"], e["status"]) for e in plan["entries"]] == [
        ("Write tests", "in_progress"), ("Fix bugs", "pending")]


def test_a_command_in_the_editors_terminal_makes_the_next_page_search_again(
    tmp_path: Path, fake_llm
) -> None:
    # A search's next page reads on from the search before it, unless something may have
    # changed the files since: here a command run in the editor's terminal.
    fake_llm.script([
        {"tool_calls": [call("search_files", pattern="hit", limit=20)]},
        {"tool_calls": [call("terminal", command="echo hit > new.txt")]},
        {"tool_calls": [call("search_files", pattern="hit", limit=100, offset=5)]},
        {"text": "searched"},
    ])
    with Editor(tmp_path, fake_llm) as ed:
        for n in range(10):
            (ed.project / f"f{n}.txt").write_text("hit\n")
        ed.initialize()
        sid = ed.new_session()
        prompt_id = ed.send_prompt(sid, "search")
        ed.result(prompt_id)
        check_turn(ed, sid, prompt_id)
    assert len(ed.terminals) == 1
    seen = text_of_requests(fake_llm)
    assert '\\"total\\": 10' in seen and '\\"total\\": 11' in seen, seen[-800:]
