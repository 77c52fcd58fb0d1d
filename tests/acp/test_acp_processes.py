"""Background processes through ACP: an editor terminal the user watches, notices when they end,
and nothing left once the session closes or the agent is killed. A real `talaria acp`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from talaria.tools.procs import start_time
from tests.acp_harness import Editor
from tests.exec_helpers import wait_for


def call(name: str, **arguments: object) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def results(fake_llm: Any) -> list[dict[str, Any]]:
    """Tool results the model was sent, in order (OpenAI format)."""
    out = []
    for request in fake_llm.requests:
        for message in request["json"].get("messages", []):
            if message.get("role") == "tool":
                out.append(json.loads(message["content"]))
    return out


def sent_texts(fake_llm: Any) -> list[str]:
    return [m["content"] for r in fake_llm.requests for m in r["json"].get("messages", [])
            if m.get("role") == "user" and isinstance(m.get("content"), str)]


def pid_in(path: Path) -> int | None:
    text = path.read_text().strip() if path.exists() else ""
    return int(text) if text.isdigit() else None


@pytest.mark.parametrize("terminal", [True, False], ids=["editor-terminal", "agent-process"])
def test_background_process_lifecycle(tmp_path: Path, fake_llm: Any, terminal: bool) -> None:
    fake_llm.script([
        call("terminal", command="echo $$ > pid; echo up; sleep 300", background=True),
        {"text": "Started."},
    ])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize(terminal=terminal)
        sid = ed.new_session()
        assert ed.prompt(sid, "start it")["stopReason"] == "end_turn"
        started = results(fake_llm)[-1]
        proc_id = started["session_id"]
        pid = ed.wait_for(lambda: pid_in(ed.project / "pid"), what="the process")
        if terminal:  # it is an editor terminal, embedded in the tool card, with the agent's marks
            [term_id] = ed.terminals
            create = [m for d, m in ed.transcript() if m.get("method") == "terminal/create"][-1]
            names = {e["name"] for e in create["params"]["env"]}
            assert {"TALARIA_AGENT", "TALARIA_PROC"} <= names
            cards = ed.tool_cards(sid)
            assert any(c.get("content") and c["content"][0].get("terminalId") == term_id
                       for updates in cards.values() for c in updates), cards
        fake_llm.script([call("process", action="poll", session_id=proc_id), {"text": "Polled."}])
        ed.prompt(sid, "how is it?")
        polled = results(fake_llm)[-1]
        assert polled["status"] == "running" and "up" in polled["new_output"]
        fake_llm.script([call("process", action="kill", session_id=proc_id), {"text": "Killed."}])
        ed.prompt(sid, "stop it")
        assert results(fake_llm)[-1]["status"] == "killed"
        assert wait_for(lambda: start_time(pid) is None, 10)
        if terminal:
            assert ed.wait_for(lambda: ed.terminals[term_id].released, what="the release")


def test_notify_on_complete_reaches_the_model_and_the_editor(tmp_path: Path, fake_llm: Any) -> None:
    fake_llm.script([
        call("terminal", command="sleep 1; echo built ok; exit 0", background=True,
             notify_on_complete=True),
        {"text": "Building in the background."},
    ])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        ed.prompt(sid, "build it")
        proc_id = results(fake_llm)[-1]["session_id"]
        notice = f"Background process {proc_id}"
        ed.wait_for(lambda: any(notice in u["content"]["text"]
                                for u in ed.updates(sid, "agent_message_chunk")), what="the notice")
        fake_llm.script([{"text": "It built."}])
        ed.prompt(sid, "and?")
        [note] = [t for t in sent_texts(fake_llm) if t.startswith(f"[{notice}")]
        assert "exit code 0" in note and "built ok" in note
        [term] = ed.terminals.values()  # it ran in the editor's terminal, released at its end
        assert ed.wait_for(lambda: term.released, what="the release")
    with Editor(tmp_path, fake_llm) as ed:  # loaded again: the note replays as a notice
        ed.initialize()
        ed.request("session/load", {"sessionId": sid, "cwd": str(ed.project), "mcpServers": []})
        users = "".join(u["content"]["text"] for u in ed.updates(sid, "user_message_chunk"))
        agent = "".join(u["content"]["text"] for u in ed.updates(sid, "agent_message_chunk"))
        assert notice not in users and notice in agent


@pytest.mark.parametrize("how", ["session/close", "exit", "kill -9"])
@pytest.mark.parametrize("terminal", [True, False], ids=["editor-terminal", "agent-process"])
def test_nothing_outlives_its_session_or_agent(tmp_path: Path, fake_llm: Any, how: str,
                                               terminal: bool) -> None:
    fake_llm.script([
        call("terminal", command="sleep 300 & echo $! > child; echo $$ > pid; sleep 300",
             background=True),
        {"text": "Started."},
    ])
    ed = Editor(tmp_path, fake_llm)
    try:
        ed.initialize(terminal=terminal)
        sid = ed.new_session()
        ed.prompt(sid, "start it")
        pids = ed.wait_for(lambda: (pid_in(ed.project / "pid"), pid_in(ed.project / "child"))
                           if pid_in(ed.project / "child") and pid_in(ed.project / "pid") else None,
                           what="the processes")
        if how == "session/close":
            assert ed.request("session/close", {"sessionId": sid}) == {}
        elif how == "exit":  # the editor closes the agent's stdin: it exits cleanly
            assert ed.close() == 0
        else:
            ed.kill9()
        assert wait_for(lambda: all(start_time(p) is None for p in pids), 15), "a process survived"
    finally:
        ed.close(check=how != "kill -9")


@pytest.mark.parametrize("terminal", [True, False], ids=["editor-terminal", "agent-process"])
def test_the_shell_remembers_in_the_editors_terminal_too(tmp_path: Path, fake_llm: Any,
                                                          terminal: bool) -> None:
    (tmp_path / "project" / "sub").mkdir(parents=True)
    fake_llm.script([
        call("terminal", command="cd sub && export COLOR=blue"),
        call("terminal", command='pwd; echo "$COLOR"'),
        {"text": "Done."},
    ])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize(terminal=terminal)
        sid = ed.new_session()
        ed.prompt(sid, "go")
        moved, here = results(fake_llm)[-2:]
        assert moved["cwd"] == str(ed.project / "sub")
        assert here["output"] == f"{ed.project / 'sub'}\nblue\n"
        if terminal:  # both ran in the editor's terminal, as the user's own commands
            creates = [m["params"] for _, m in ed.transcript() if m.get("method") == "terminal/create"]
            assert [c["args"][-1] for c in creates] == ["cd sub && export COLOR=blue",
                                                        'pwd; echo "$COLOR"']


SHELL = "sh -c 'while read l; do eval \"$l\"; done'"


def test_plan_mode_refuses_input_to_a_background_shell_the_user_allowed(tmp_path: Path,
                                                                       fake_llm: Any) -> None:
    """Issue 23, item 1: the user allows a background shell in default mode, the session
    switches to plan, and the model sends it a command: refused like the same turn's
    `terminal`, no question, the file unchanged. Back in default mode the same input asks."""
    fake_llm.script([call("terminal", command=SHELL, background=True), {"text": "Started."}])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize(terminal=False)  # an agent process: editor terminals take no input
        sid = ed.new_session()
        hello = ed.project / "hello.txt"
        hello.write_text("hello\n")
        assert ed.prompt(sid, "start a shell")["stopReason"] == "end_turn"
        proc_id = results(fake_llm)[-1]["session_id"]
        assert len(ed.permission_requests) == 1  # the user saw it and allowed it
        ed.request("session/set_mode", {"sessionId": sid, "modeId": "plan"})
        fake_llm.script([
            {"tool_calls": [
                {"name": "process", "arguments": {"action": "submit", "session_id": proc_id,
                                                  "data": "echo pwned > hello.txt"}},
                {"name": "process", "arguments": {"action": "write", "session_id": proc_id,
                                                  "data": "echo pwned > hello.txt\n"}},
                {"name": "terminal", "arguments": {"command": "echo pwned > hello.txt"}}]},
            {"text": "Refused."},
        ])
        assert ed.prompt(sid, "write it")["stopReason"] == "end_turn"
        submitted, written, command = results(fake_llm)[-3:]
        for refused in (submitted, written, command):
            assert refused["rejected"] and "Plan mode is read-only" in refused["error"], refused
        assert len(ed.permission_requests) == 1  # plan refuses without asking
        fake_llm.script([call("process", action="poll", session_id=proc_id), {"text": "Alive."}])
        ed.prompt(sid, "is it alive?")
        assert results(fake_llm)[-1]["status"] == "running"  # it keeps running in plan mode
        assert hello.read_text() == "hello\n"

        ed.request("session/set_mode", {"sessionId": sid, "modeId": "default"})
        fake_llm.script([call("process", action="submit", session_id=proc_id,
                              data="echo ok > ok.txt"), {"text": "Sent."}])
        ed.prompt(sid, "now do it")
        asked = ed.permission_requests[-1]["toolCall"]
        assert len(ed.permission_requests) == 2 and asked["kind"] == "execute"
        assert "echo ok > ok.txt" in asked["title"]
        assert ed.wait_for(lambda: (ed.project / "ok.txt").exists(), what="the shell's write")
        assert hello.read_text() == "hello\n"


def test_a_process_that_ends_between_turns_is_told_to_the_editor_then(tmp_path: Path, fake_llm: Any) -> None:
    """Without notify_on_complete too: the user hears of the end while the session is idle (a
    `notice` for clients that show them); the model is not told (it did not ask)."""
    fake_llm.script([
        call("terminal", command="sleep 1; echo served", background=True),
        {"text": "Started."},
    ])
    with Editor(tmp_path, fake_llm, unstable=True) as ed:
        ed.initialize(session={"notices": {}})
        sid = ed.new_session()
        ed.prompt(sid, "serve it")
        proc_id = results(fake_llm)[-1]["session_id"]
        ed.wait_for(lambda: any(f"Background process {proc_id}" in n["title"]
                                for n in ed.updates(sid, "notice")), what="the notice")
        fake_llm.script([{"text": "ok"}])
        ed.prompt(sid, "and?")
        assert not [t for t in sent_texts(fake_llm) if f"[Background process {proc_id}" in t]
