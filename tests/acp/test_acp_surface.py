"""What a finished tool call and a refusal say to real clients (issue 27): the tool's `name`
next to its `kind`, `rawOutput` on completed calls, a command's card without the folder as a
location, the editor's own reason when it refuses a request, a client that cannot ask is not a
user who said no, and `/steer` with nothing running becomes a prompt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.acp_client_side import ClientError
from tests.acp_harness import Editor


def call(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


def tool_message(llm: Any, call_id: str) -> dict[str, Any]:
    messages = llm.requests[-1]["json"]["messages"]
    return json.loads(next(m["content"] for m in messages if m.get("tool_call_id") == call_id))


def test_cards_carry_the_tool_name_and_the_raw_output(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"tool_calls": [call("read_file", "r1", path="a.py"),
                                     call("terminal", "t1", command="echo hi")]},
                     {"text": "Read and ran."}])
    with Editor(tmp_path, fake_llm, permission="allow_once") as ed:
        (ed.project / "a.py").write_text("x = 1\n")
        ed.initialize()
        sid = ed.new_session()
        assert ed.prompt(sid, "go")["stopReason"] == "end_turn"
        started = {u["toolCallId"]: u for u in ed.updates(sid, "tool_call")}
        finished = {u["toolCallId"]: u for u in ed.updates(sid, "tool_call_update")
                    if u.get("status") in ("completed", "failed")}
    assert (started["r1"]["name"], started["r1"]["kind"]) == ("read_file", "read")
    assert (started["t1"]["name"], started["t1"]["kind"]) == ("terminal", "execute")
    assert started["r1"]["locations"] == [{"path": str(ed.project / "a.py")}]
    assert started["t1"]["locations"] == []  # the command is the card, not the folder
    assert "echo hi" in started["t1"]["title"]
    assert finished["r1"]["rawOutput"] == tool_message(fake_llm, "r1")  # what the model got
    assert finished["t1"]["rawOutput"]["exit_code"] == 0
    assert "hi" in json.dumps(finished["t1"]["rawOutput"])


class DenyingEditor(Editor):
    """acpx with --deny-all: reads refused with -32603 and the reason in `data.details`."""

    def _on_fs_read_text_file(self, params: dict[str, Any], rid: Any) -> Any:
        raise ClientError(-32603, "Internal error",
                          {"details": "Permission denied for fs/read_text_file (--deny-all)"})


def test_the_editors_reason_reaches_the_model_and_the_card(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"tool_calls": [call("read_file", "r1", path="a.py")]}, {"text": "Denied."}])
    with DenyingEditor(tmp_path, fake_llm) as ed:
        (ed.project / "a.py").write_text("x = 1\n")
        ed.initialize()
        sid = ed.new_session()
        assert ed.prompt(sid, "read it")["stopReason"] == "end_turn"
        card = [u for u in ed.updates(sid, "tool_call_update") if u.get("status") == "failed"]
    error = tool_message(fake_llm, "r1")["error"]
    assert "Permission denied for fs/read_text_file (--deny-all)" in error, error
    assert "Permission denied for fs/read_text_file" in json.dumps(card)


def test_a_client_that_cannot_ask_is_not_a_user_who_said_no(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"tool_calls": [call("write_file", "w1", path="b.py", content="y = 2\n"),
                                     ]},
                     {"tool_calls": [call("write_file", "w2", path="b.py", content="y = 3\n")]},
                     {"text": "Could not."}])
    with Editor(tmp_path, fake_llm, permission="error") as ed:
        ed.initialize()
        sid = ed.new_session()
        assert ed.prompt(sid, "write it")["stopReason"] == "end_turn"
        errors = [tool_message(fake_llm, "w2")["error"]]
    first = json.loads(next(m["content"] for m in fake_llm.requests[1]["json"]["messages"]
                            if m.get("tool_call_id") == "w1"))["error"]
    for error in (first, *errors):
        assert "could not ask" in error and "rejected" not in error, error
        assert "accept_edits" in error  # what would allow an edit, not a mode that would not
    assert not (ed.project / "b.py").exists()
    assert len(ed.permission_requests) == 2  # not remembered as the user's refusal: asked again


def test_steer_with_nothing_running_is_sent_as_a_prompt(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"text": "Using the helper."}])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        answer = ed.prompt(sid, "/steer use the existing helper in utils.py")
        said = "".join(u["content"].get("text", "") for u in ed.updates(sid, "agent_message_chunk"))
    assert answer["stopReason"] == "end_turn"
    assert "sent as a prompt" in said and "Using the helper." in said
    assert fake_llm.requests[-1]["json"]["messages"][-1]["content"] == "use the existing helper in utils.py"


def test_notices_for_clients_that_show_them_and_quiet_ones_left_out_of_the_answer(
        tmp_path: Path, fake_llm) -> None:
    """With `session.notices`, a queued prompt's notice is a `notice` update (severity, title),
    not answer text; without it, a note nobody needs in the answer (no checkpoint: git is
    missing here) is not streamed as `agent_message_chunk` (Harbor recorded it as the model's)."""
    import os
    import shutil
    import sys

    bin_dir = tmp_path / "bin"  # a PATH with python and the shell tools, but no git
    bin_dir.mkdir()
    for tool in ("sh", "bash", "env", "sleep", "cat", "rg", "bwrap"):
        if found := shutil.which(tool):
            os.symlink(found, bin_dir / tool)
    os.symlink(sys.executable, bin_dir / "python3")
    write = {"tool_calls": [call("write_file", "w1", path="b.py", content="y = 2\n")]}
    slow = {"tool_calls": [call("terminal", "s1", command="sleep 1")]}
    fake_llm.script([write, {"text": "Written."}, slow, {"text": "First."}, {"text": "Second."}])
    with Editor(tmp_path, fake_llm, permission="allow_always", unstable=True,
                env={"PATH": str(bin_dir)}) as ed:
        ed.initialize()  # no session.notices
        sid = ed.new_session()
        assert ed.prompt(sid, "write it")["stopReason"] == "end_turn"
        answer = "".join(u["content"]["text"] for u in ed.updates(sid, "agent_message_chunk"))
        ed.initialize(session={"notices": {}})
        noticed = ed.new_session()
        first = ed.send_prompt(noticed, "slow one")
        ed.wait_for(lambda: ed.updates(noticed, "tool_call"), what="the running command")
        assert ed.prompt(noticed, "then this")["stopReason"] == "end_turn"
        assert ed.result(first)["stopReason"] == "end_turn"
        notes = ed.updates(noticed, "notice")
        texts = "".join(u["content"]["text"] for u in ed.updates(noticed, "agent_message_chunk"))
    assert ed.writes and "Written." in answer  # the write went through the editor
    assert "checkpoint" not in answer.lower()
    assert any(n["title"].startswith("Queued") and n["severity"] == "info" for n in notes), notes
    assert "Queued" not in texts
