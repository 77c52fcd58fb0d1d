"""Checkpoints through a real `talaria acp` and a scripted editor: edits the editor holds in
unsaved buffers come back from their pre-images, and restores go through fs/write_text_file."""

from __future__ import annotations

from pathlib import Path

from tests.acp_harness import Editor


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def said(ed: Editor, sid: str) -> str:
    return "".join(u["content"]["text"] for u in ed.updates(sid, "agent_message_chunk"))


def test_undo_restores_editor_buffers_and_disk_changes_through_the_editor(tmp_path: Path,
                                                                           fake_llm) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("original a\n")
    (project / "b.txt").write_text("original b\n")
    fake_llm.script([
        {"tool_calls": [call("write_file", path="a.txt", content="agent a\n"),
                        call("terminal", command="echo command b > b.txt")]},
        {"text": "Done."},
    ])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize(terminal=False)  # fs through the editor, commands on the disk
        sid = ed.new_session()
        ed.request("session/set_mode", {"sessionId": sid, "modeId": "auto"})
        assert ed.prompt(sid, "change both")["stopReason"] == "end_turn"
        assert ed.buffers[str(project / "a.txt")] == "agent a\n"
        assert (project / "a.txt").read_text() == "original a\n"  # the editor holds the edit
        listing_start = len(said(ed, sid))
        assert ed.prompt(sid, "/checkpoints")["stopReason"] == "end_turn"
        listing = said(ed, sid)[listing_start:]
        writes_before = len(ed.writes)
        assert ed.prompt(sid, "/undo")["stopReason"] == "end_turn"
        restored = dict(ed.writes[writes_before:])
        reply = said(ed, sid)
    assert "2 file(s): a.txt, b.txt" in listing
    assert restored == {str(project / "a.txt"): "original a\n", str(project / "b.txt"): "original b\n"}, reply
    assert "a.txt (written in the editor → restored)" in reply
    assert "b.txt (modified since → restored)" in reply


def test_restore_of_a_missing_checkpoint_is_a_clear_error(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        error = ed.error("session/prompt", {"sessionId": sid, "prompt": [
            {"type": "text", "text": "/restore 4"}]})
        nothing = ed.error("session/prompt", {"sessionId": sid, "prompt": [
            {"type": "text", "text": "/undo"}]})
    assert error.code == -32602 and "no checkpoint 4" in f"{error.message} {error.data}"
    assert "nothing to undo" in f"{nothing.message} {nothing.data}"
