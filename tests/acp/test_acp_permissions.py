"""Permission modes and answers end to end: who is asked, what is remembered, what the model sees."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from talaria.agent.permissions import MODES
from talaria.tools.sandbox.tiers import BOOT
from tests.acp_checks import check_turn, final
from tests.acp_harness import Editor, server_env


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


def launched(ed: Editor) -> list[list[str]]:
    """The argv of every `terminal/create` the editor ran."""
    return [list(term.proc.args) for term in ed.terminals.values()]


def test_auto_asks_only_for_sensitive_paths_and_sandboxes_commands(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([
        {"tool_calls": [call("write_file", path="ok.txt", content="ok"), call("terminal", command="true"),
                        call("write_file", path=".env", content="SECRET=1"),
                        call("write_file", path=".git/config", content="[core]")]},
        {"text": "ok"},
    ])
    with Editor(tmp_path, fake_llm, permission="reject_once") as ed:
        sid = session(ed, "auto")
        ok, command, env, git = run(ed, sid).values()
    # Edits of different files run side by side: their questions may come in either order.
    asked = sorted(p["toolCall"]["toolCallId"] for p in ed.permission_requests)
    assert asked == sorted([env[0]["toolCallId"], git[0]["toolCallId"]])
    assert all("sensitive" in json.dumps(p["toolCall"].get("content")) for p in ed.permission_requests)
    assert final(ok)["status"] == final(command)["status"] == "completed"
    assert final(env)["status"] == final(git)["status"] == "failed"
    assert [path for path, _ in ed.writes] == [str(ed.project / "ok.txt")]
    (argv,) = launched(ed)  # the editor ran the sandbox launcher, which ran bash
    assert argv[-3:] == ["bash", "-c", "true"] and BOOT in argv


def test_dont_ask_refuses_what_was_not_approved_and_runs_the_rest_sandboxed(
    tmp_path: Path, fake_llm
) -> None:
    fake_llm.script([
        {"tool_calls": [call("terminal", command="echo approved")]},
        {"text": "ok"},
        {"tool_calls": [call("terminal", command="echo approved"), call("terminal", command="echo other"),
                        call("write_file", path="a.txt", content="a"), call("read_file", path="c.txt")]},
        {"text": "ok"},
    ])
    with Editor(tmp_path, fake_llm, permission="allow_always") as ed:
        (ed.project / "c.txt").write_text("c\n")
        sid = session(ed, "default")
        (first,) = run(ed, sid).values()
        ed.request("session/set_mode", {"sessionId": sid, "modeId": "dontAsk"})
        again, other, write, read = run(ed, sid).values()
    assert [p["toolCall"]["toolCallId"] for p in ed.permission_requests] == [first[0]["toolCallId"]]
    assert final(first)["status"] == final(again)["status"] == final(read)["status"] == "completed"
    assert final(other)["status"] == final(write)["status"] == "failed" and not ed.writes
    results = tool_results(fake_llm)
    assert "dont_ask" in results[other[0]["toolCallId"]]["error"]
    seen, unseen = launched(ed)  # asked: runs as the user saw it; approved before: sandboxed
    assert seen == ["bash", "-c", "echo approved"]
    assert unseen[-3:] == seen and unseen[0] != "bash"


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
        # Even in auto, where commands never ask, this one does.
        ed.request("session/set_mode", {"sessionId": sid, "modeId": "auto"})
        (again,) = run(ed, sid).values()
    assert [p["toolCall"]["toolCallId"] for p in ed.permission_requests] == [
        patch[0]["toolCallId"], command[0]["toolCallId"], again[0]["toolCallId"]]
    for request in ed.permission_requests[1:]:
        shown = json.dumps(request["toolCall"].get("content"))
        assert "foo.py" in shown and "rejected" in shown
    assert final(command)["status"] == final(again)["status"] == "failed"
    assert not ed.terminals
    assert (ed.project / "foo.py").read_text() == "a = 1\n"


def test_a_client_that_fails_the_permission_request_refuses_the_call_unasked(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"tool_calls": [call("write_file", path="a.txt", content="a")]}, {"text": "ok"}])
    with Editor(tmp_path, fake_llm, permission="error") as ed:
        sid = session(ed, "default")
        (card,) = run(ed, sid).values()
    assert final(card)["status"] == "failed" and not ed.writes
    error = tool_results(fake_llm)[card[0]["toolCallId"]]["error"]
    assert "could not ask" in error and "rejected" not in error  # nobody said no (issue 27)


def test_the_headless_bypass_mode_never_reaches_an_editor_session(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"tool_calls": [call("write_file", path="a.txt", content="a")]}, {"text": "ok"}])
    with Editor(tmp_path, fake_llm, env={"TALARIA_MODE": "bypass"}, permission="reject_once") as ed:
        ed.initialize()
        result = ed.request("session/new", {"cwd": str(ed.project), "mcpServers": []})
        run(ed, result["sessionId"])
    assert result["modes"]["currentModeId"] == "default"
    assert {o["id"]: o for o in result["configOptions"]}["mode"]["currentValue"] == "default"
    assert len(ed.permission_requests) == 1 and not ed.writes


# -- mode names at every entry ----------------------------------------------------------------

BAD_MODES = ("yolo", "dontask", "Default", "accept-edits", "", "bypass", "bypassPermissions")


def test_every_editor_entry_takes_claude_code_names_and_refuses_unknown_ones(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        assert ed.request("session/set_mode", {"sessionId": sid, "modeId": "acceptEdits"}) == {}
        assert ed.updates(sid, "current_mode_update")[-1]["currentModeId"] == "accept_edits"
        result = ed.request("session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "dontAsk"})
        assert {o["id"]: o for o in result["configOptions"]}["mode"]["currentValue"] == "dont_ask"
        for bad in BAD_MODES:
            for method, params in (("session/set_mode", {"modeId": bad}),
                                   ("session/set_config_option", {"configId": "mode", "value": bad})):
                err = ed.error(method, {"sessionId": sid, **params})
                shown = f"{err.message} {err.data}"
                assert err.code == -32602 and all(m in shown for m in MODES), (bad, shown)
        assert ed.prompt(sid, "/mode auto")["stopReason"] == "end_turn"
        said = "".join(u["content"]["text"] for u in ed.updates(sid, "agent_message_chunk"))
        assert "Mode set to auto" in said
        assert ed.error("session/prompt", {"sessionId": sid,
                                           "prompt": [{"type": "text", "text": "/mode yolo"}]}).code == -32602
        assert ed.updates(sid, "current_mode_update")[-1]["currentModeId"] == "auto"


def talaria(args: list[str], home: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = server_env(home, None, **env)
    return subprocess.run([sys.executable, "-m", "talaria.acp_server", *args], env=full, cwd=cwd,
                          capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)


def test_a_bad_mode_from_the_environment_flag_or_config_file_stops_talaria(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    for bad in BAD_MODES[:4]:
        for args in (["acp"], ["config"], ["run", "hi"]):
            done = talaria(args, home, tmp_path, TALARIA_MODE=bad)
            assert done.returncode == 2 and "env TALARIA_MODE" in done.stderr, (args, done.stderr)
            assert all(m in done.stderr for m in MODES) and "Traceback" not in done.stderr
            assert done.stdout == "", "stdout stays protocol-only"
        done = talaria(["run", "hi", "--mode", bad], home, tmp_path)
        assert done.returncode == 2 and "--mode" in done.stderr and "unknown permission mode" in done.stderr
        (home / "config.toml").write_text(f'mode = "{bad}"\n')
        done = talaria(["config"], home, tmp_path)
        assert done.returncode == 2 and "config.toml" in done.stderr and "auto" in done.stderr
        (home / "config.toml").unlink()
    (home / "config.toml").write_text('mode = "acceptEdits"\n')
    assert "accept_edits  (config.toml)" in talaria(["config"], home, tmp_path).stdout
