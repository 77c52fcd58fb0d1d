"""An edit's permission question carries its diff, computed before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

from tests.acp_checks import check_turn, final
from tests.acp_harness import Editor


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def turn(ed: Editor) -> dict[str, list[dict]]:
    ed.initialize()
    sid = ed.new_session()
    prompt_id = ed.send_prompt(sid, "edit")
    assert ed.result(prompt_id)["stopReason"] == "end_turn"
    return check_turn(ed, sid, prompt_id)


def diffs(request: dict) -> list[dict]:
    return [c for c in request["toolCall"].get("content") or () if c["type"] == "diff"]


def test_patch_and_write_file_are_asked_with_the_diff_they_would_make(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([
        {"tool_calls": [call("patch", path="a.txt", old_string="one", new_string="two"),
                        call("write_file", path="sub/new.txt", content="fresh\n")]},
        {"text": "ok"},
    ])
    with Editor(tmp_path, fake_llm, permission="reject_once") as ed:
        a = ed.project / "a.txt"
        a.write_text("on disk\n")
        ed.buffers[str(a)] = "one\nkeep\n"  # unsaved in the editor: the diff is against this
        patch, write = turn(ed).values()
    asked = {p["toolCall"]["toolCallId"]: p for p in ed.permission_requests}
    assert diffs(asked[patch[0]["toolCallId"]]) == [
        {"type": "diff", "path": str(a), "oldText": "one\nkeep\n", "newText": "two\nkeep\n"}]
    assert diffs(asked[write[0]["toolCallId"]]) == [
        {"type": "diff", "path": str(ed.project / "sub" / "new.txt"), "oldText": None,
         "newText": "fresh\n"}]
    # Rejected: nothing was written, on disk or through the editor.
    assert not ed.writes and a.read_text() == "on disk\n" and not (ed.project / "sub").exists()
    assert final(patch)["status"] == final(write)["status"] == "failed"


def test_an_edit_that_cannot_apply_is_asked_without_a_diff(tmp_path: Path, fake_llm) -> None:
    """The question still comes (the failure text could show a file the user has not allowed
    to be read); it only has no diff to show."""
    fake_llm.script([{"tool_calls": [call("patch", path="a.txt", old_string="absent", new_string="x")]},
                     {"text": "ok"}])
    with Editor(tmp_path, fake_llm, permission="allow_once") as ed:
        (ed.project / "a.txt").write_text("one\n")
        (card,) = turn(ed).values()
    (request,) = ed.permission_requests
    assert not diffs(request)
    assert final(card)["status"] == "failed"
    assert "old_string not found" in json.dumps(final(card)["content"])


def test_the_allowed_edit_is_the_one_shown(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"tool_calls": [call("patch", path="a.txt", old_string="one", new_string="two")]},
                     {"text": "ok"}])
    with Editor(tmp_path, fake_llm, permission="allow_once") as ed:
        (ed.project / "a.txt").write_text("one\n")
        (card,) = turn(ed).values()
    (request,) = ed.permission_requests
    (shown,) = diffs(request)
    assert ed.writes == [(shown["path"], shown["newText"])]
    assert [c for c in final(card)["content"] if c["type"] == "diff"] == [shown]
