"""execute_code in an editor: a real `talaria acp` process and a scripted ACP client.

The script's tool calls become the editor's `fs/*` requests and their own tool cards, asked
for like direct calls; its kernel dies with its session and with the server (`kill -9`)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tests.acp_checks import check_turn, final
from tests.acp_harness import Editor
from tests.exec_helpers import tagged, wait_gone

SCRIPT = textwrap.dedent("""\
    import os
    from hermes_tools import read_file, patch
    print(read_file("a.py")["content"])
    print(patch("a.py", "x = 1", "x = 2").get("error", "patched"))
    print(os.path.basename(os.environ["TMPDIR"]))  # the kernel's tag
""")


def run_script(ed: Editor, sid: str, fake_llm) -> tuple[dict, dict[str, list[dict]]]:
    fake_llm.script([{"tool_calls": [{"name": "execute_code", "arguments": {"code": SCRIPT}}]},
                     {"text": "done"}])
    prompt_id = ed.send_prompt(sid, "go")
    assert ed.result(prompt_id)["stopReason"] == "end_turn"
    cards = check_turn(ed, sid, prompt_id)
    message = next(m for m in fake_llm.requests[-1]["json"]["messages"] if m["role"] == "tool")
    return json.loads(message["content"]), cards


def test_script_tool_calls_go_through_the_editor(tmp_path: Path, fake_llm) -> None:
    ed = Editor(tmp_path, fake_llm)
    try:
        path = str(ed.project / "a.py")
        (ed.project / "a.py").write_text("x = 1  # on disk\n")
        ed.buffers[path] = "x = 1  # unsaved buffer\n"
        ed.initialize()
        sid = ed.new_session()
        result, cards = run_script(ed, sid, fake_llm)
        exec_id, read_id, patch_id = cards
        assert result["output"].startswith("1|x = 1  # unsaved buffer\npatched\n")
        # read_file, the diff shown with patch's permission question, then patch's own read
        assert ed.reads == [path, path, path]
        assert ed.writes == [(path, "x = 2  # unsaved buffer\n")]
        assert (ed.project / "a.py").read_text() == "x = 1  # on disk\n"
        asked = [p["toolCall"]["toolCallId"] for p in ed.permission_requests]
        assert asked == [exec_id, patch_id]
        (diff,) = [c for c in ed.permission_requests[1]["toolCall"]["content"] if c["type"] == "diff"]
        assert (diff["oldText"], diff["newText"]) == ("x = 1  # unsaved buffer\n", "x = 2  # unsaved buffer\n")
        assert cards[read_id][0]["kind"] == "read" and cards[patch_id][0]["kind"] == "edit"
        assert cards[patch_id][0]["locations"] == [{"path": path}]
        assert final(cards[patch_id])["content"][0]["type"] == "diff"
        assert all(final(c)["status"] == "completed" for c in cards.values())

        tag = result["output"].split()[-1]
        assert tagged(tag)
        ed.request("session/close", {"sessionId": sid})
        assert wait_gone(tag), "the kernel dies with its session"

        sid = ed.new_session()
        tag = run_script(ed, sid, fake_llm)[0]["output"].split()[-1]
        assert tagged(tag)
        ed.kill9()
        ed.close(check=True)
        assert wait_gone(tag), "and with the server, even after kill -9"
    finally:
        ed.close(check=False)
