"""Permission modes and answers end to end: who is asked, what is remembered, what the model sees."""

from __future__ import annotations

import json
from pathlib import Path

from tests.acp_checks import check_turn, final
from tests.acp_harness import Editor


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def tool_results(llm) -> dict[str, dict]:
    """tool_call_id -> the result the model was shown (from the last request)."""
    messages = llm.requests[-1]["json"]["messages"]
    return {m["tool_call_id"]: json.loads(m["content"]) for m in messages if m["role"] == "tool"}


def run(ed: Editor, sid: str, text: str = "go") -> dict[str, list[dict]]:
    prompt_id = ed.send_prompt(sid, text)
    assert ed.result(prompt_id)["stopReason"] == "end_turn"
    return check_turn(ed, sid, prompt_id)


def session(ed: Editor, mode: str) -> str:
    ed.initialize()
    sid = ed.new_session()
    ed.request("session/set_mode", {"sessionId": sid, "modeId": mode})
    return sid


def test_accept_edits_writes_project_files_silently_but_commands_ask(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([
        {"tool_calls": [call("write_file", path="a.txt", content="a"), call("terminal", command="true")]},
        {"text": "ok"},
    ])
    with Editor(tmp_path, fake_llm) as ed:
        sid = session(ed, "accept_edits")
        write, command = run(ed, sid).values()
    assert [p["toolCall"]["toolCallId"] for p in ed.permission_requests] == [command[0]["toolCallId"]]
    assert final(write)["status"] == final(command)["status"] == "completed"


def test_plan_mode_refuses_writes_and_commands_without_asking(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([
        {"tool_calls": [call("write_file", path="a.txt", content="a"), call("terminal", command="touch b.txt"),
                        call("read_file", path="c.txt")]},
        {"text": "ok"},
    ])
    with Editor(tmp_path, fake_llm) as ed:
        (ed.project / "c.txt").write_text("c\n")
        sid = session(ed, "plan")
        write, command, read = run(ed, sid).values()
    assert not ed.permission_requests and not ed.writes and not ed.terminals
    assert not (ed.project / "b.txt").exists()
    assert final(write)["status"] == final(command)["status"] == "failed"
    assert final(read)["status"] == "completed"
    results = tool_results(fake_llm)
    for card in (write, command):
        assert "Plan mode is read-only" in results[card[0]["toolCallId"]]["error"]


def test_dont_ask_asks_only_for_sensitive_paths(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([
        {"tool_calls": [call("write_file", path="ok.txt", content="ok"), call("terminal", command="true"),
                        call("write_file", path=".env", content="SECRET=1"),
                        call("write_file", path=".git/config", content="[core]")]},
        {"text": "ok"},
    ])
    with Editor(tmp_path, fake_llm, permission="reject_once") as ed:
        sid = session(ed, "dont_ask")
        ok, command, env, git = run(ed, sid).values()
    asked = [p["toolCall"]["toolCallId"] for p in ed.permission_requests]
    assert asked == [env[0]["toolCallId"], git[0]["toolCallId"]]
    assert "sensitive" in json.dumps(ed.permission_requests[0]["toolCall"].get("content"))
    assert final(ok)["status"] == final(command)["status"] == "completed"
    assert final(env)["status"] == final(git)["status"] == "failed"
    assert [path for path, _ in ed.writes] == [str(ed.project / "ok.txt")]


def test_allow_always_is_remembered_for_the_path_in_the_session(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([
        {"tool_calls": [call("write_file", path="a.txt", content="1")]},
        {"tool_calls": [call("write_file", path="a.txt", content="2")]},
        {"tool_calls": [call("write_file", path="b.txt", content="3")]},
        {"text": "ok"},
    ])
    with Editor(tmp_path, fake_llm, permission="allow_always") as ed:
        sid = session(ed, "default")
        first, second, other = run(ed, sid).values()
    asked = [p["toolCall"]["toolCallId"] for p in ed.permission_requests]
    assert asked == [first[0]["toolCallId"], other[0]["toolCallId"]]  # not the second a.txt
    assert len(ed.writes) == 3


def test_reject_once_and_reject_always(tmp_path: Path, fake_llm) -> None:
    answers = iter(["reject_once", "reject_always"])
    fake_llm.script([
        {"tool_calls": [call("write_file", path="a.txt", content="1")]},
        {"tool_calls": [call("write_file", path="b.txt", content="2")]},
        {"tool_calls": [call("write_file", path="b.txt", content="3")]},
        {"text": "ok"},
    ])
    with Editor(tmp_path, fake_llm, permission=lambda _: next(answers)) as ed:
        sid = session(ed, "default")
        once, always, again = run(ed, sid).values()
    assert len(ed.permission_requests) == 2  # the second b.txt is refused from memory
    assert not ed.writes
    assert all(final(c)["status"] == "failed" for c in (once, always, again))
    assert all(len(c) == 2 for c in (once, always, again))  # pending -> failed, never in_progress
    results = tool_results(fake_llm)
    assert "rejected" in results[once[0]["toolCallId"]]["error"]
    assert "rejected" in results[again[0]["toolCallId"]]["error"]


def test_a_rejected_edit_cannot_be_slipped_through_the_terminal(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([
        {"tool_calls": [call("patch", path="foo.py", old_string="a = 1", new_string="a = 2")]},
        {"tool_calls": [call("terminal", command="sed -i s/1/2/ foo.py")]},
        {"text": "ok"},
        {"tool_calls": [call("terminal", command="echo 2 > foo.py")]},
        {"text": "ok"},
    ])
    with Editor(tmp_path, fake_llm, permission="reject_once") as ed:
        (ed.project / "foo.py").write_text("a = 1\n")
        sid = session(ed, "default")
        patch, command = run(ed, sid).values()
        # Even in dont_ask, where commands never ask, this one does.
        ed.request("session/set_mode", {"sessionId": sid, "modeId": "dont_ask"})
        (again,) = run(ed, sid).values()
    assert [p["toolCall"]["toolCallId"] for p in ed.permission_requests] == [
        patch[0]["toolCallId"], command[0]["toolCallId"], again[0]["toolCallId"]]
    for request in ed.permission_requests[1:]:
        shown = json.dumps(request["toolCall"].get("content"))
        assert "foo.py" in shown and "rejected" in shown
    assert final(command)["status"] == final(again)["status"] == "failed"
    assert not ed.terminals
    assert (ed.project / "foo.py").read_text() == "a = 1\n"


def test_a_client_that_fails_the_permission_request_rejects_the_call(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"tool_calls": [call("write_file", path="a.txt", content="a")]}, {"text": "ok"}])
    with Editor(tmp_path, fake_llm, permission="error") as ed:
        sid = session(ed, "default")
        (card,) = run(ed, sid).values()
    assert final(card)["status"] == "failed" and not ed.writes
    assert "rejected" in tool_results(fake_llm)[card[0]["toolCallId"]]["error"]


def test_the_headless_bypass_mode_never_reaches_an_editor_session(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"tool_calls": [call("write_file", path="a.txt", content="a")]}, {"text": "ok"}])
    with Editor(tmp_path, fake_llm, env={"TALARIA_MODE": "bypass"}, permission="reject_once") as ed:
        ed.initialize()
        result = ed.request("session/new", {"cwd": str(ed.project), "mcpServers": []})
        run(ed, result["sessionId"])
    assert result["modes"]["currentModeId"] == "default"
    assert {o["id"]: o for o in result["configOptions"]}["mode"]["currentValue"] == "default"
    assert len(ed.permission_requests) == 1 and not ed.writes
