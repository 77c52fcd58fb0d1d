"""Sessions outlive the process: SQLite store, session/load replay, resume, list, close, kill -9."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.acp_checks import check_turn
from tests.acp_harness import AGENT_TO_CLIENT, Editor


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


TODOS = [{"id": "1", "content": "Read the file", "status": "completed"},
         {"id": "2", "content": "Dropped idea", "status": "cancelled"},
         {"id": "3", "content": "Write the fix", "status": "pending"}]


def first_turn(tmp_path: Path, fake_llm) -> tuple[str, Path]:
    """A session with thoughts, text, a read, an edit, a terminal command and a plan."""
    fake_llm.script([
        {"reasoning": "Thinking first.", "text": "Reading.",
         "tool_calls": [call("read_file", path="a.txt"), call("todo", todos=TODOS)]},
        {"tool_calls": [call("write_file", path="b.txt", content="bee\n")]},
        {"tool_calls": [call("terminal", command="echo from-the-terminal")]},
        {"text": "All done."},
    ])
    with Editor(tmp_path, fake_llm) as ed:
        (ed.project / "a.txt").write_text("alpha\n")
        ed.initialize()
        sid = ed.new_session()
        assert ed.prompt(sid, "Fix the thing")["stopReason"] == "end_turn"
    return sid, ed.project


def test_session_load_in_a_new_process_replays_everything_before_answering(tmp_path: Path, fake_llm) -> None:
    sid, project = first_turn(tmp_path, fake_llm)
    fake_llm.script([{"tool_calls": [call("todo")]}, {"text": "Second answer."}])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        load_id = ed.send("session/load", {"sessionId": sid, "cwd": str(project), "mcpServers": []})
        state = ed.result(load_id)
        ed.sync()
        transcript = ed.transcript()
        answered = next(i for i, (d, m) in enumerate(transcript) if m.get("id") == load_id and d == AGENT_TO_CLIENT)
        replayed = [m["params"]["update"] for d, m in transcript[:answered] if m.get("method") == "session/update"]
        after = [m["params"]["update"]["sessionUpdate"] for d, m in transcript[answered:]
                 if m.get("method") == "session/update"]
        prompt_id = ed.send_prompt(sid, "And now?")
        assert ed.result(prompt_id)["stopReason"] == "end_turn"
        check_turn(ed, sid, prompt_id)
    assert state["modes"]["currentModeId"] == "default" and state["configOptions"]
    assert after == ["available_commands_update"]
    kinds = [u["sessionUpdate"] for u in replayed]
    assert kinds[:3] == ["user_message_chunk", "agent_thought_chunk", "agent_message_chunk"]
    assert replayed[0]["content"]["text"] == "Fix the thing"
    assert replayed[-1] == {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "All done."}}
    calls = [u for u in replayed if u["sessionUpdate"] == "tool_call"]
    assert [c["kind"] for c in calls] == ["read", "think", "edit", "execute"]
    assert all(c["status"] == "completed" and c["content"] for c in calls)
    assert calls[0]["locations"] == [{"path": str(project / "a.txt")}]
    assert calls[2]["content"] == [{"type": "diff", "path": str(project / "b.txt"), "oldText": None, "newText": "bee\n"}]
    # A terminal is gone after the turn: its output is replayed as text, never its id.
    assert all(c["type"] != "terminal" for c in calls[3]["content"])
    assert "from-the-terminal" in calls[3]["content"][0]["content"]["text"]
    (plan,) = [u for u in replayed if u["sessionUpdate"] == "plan"]
    assert [e["content"] for e in plan["entries"]] == ["Read the file", "Write the fix"]
    # The model gets the whole history back.
    history = fake_llm.requests[-1]["json"]["messages"]
    assert any(m["role"] == "user" and "Fix the thing" in str(m["content"]) for m in history)
    assert any(m["role"] == "user" and "And now?" in str(m["content"]) for m in history)
    # The todo list is restored with the session: the model reads back its plan.
    assert "Write the fix" in history[-1]["content"] and history[-1]["role"] == "tool"


def test_session_resume_restores_without_replay(tmp_path: Path, fake_llm) -> None:
    sid, project = first_turn(tmp_path, fake_llm)
    with Editor(tmp_path, fake_llm) as ed:  # mode and model choices are kept too
        ed.initialize()
        ed.request("session/resume", {"sessionId": sid, "cwd": str(project)})
        ed.request("session/set_mode", {"sessionId": sid, "modeId": "plan"})
        ed.request("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "openai:other"})
    fake_llm.script([{"text": "Resumed."}])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        state = ed.request("session/resume", {"sessionId": sid, "cwd": str(project)})
        ed.sync()
        assert [u["sessionUpdate"] for u in ed.updates(sid)] == ["available_commands_update"]
        assert ed.prompt(sid, "Continue")["stopReason"] == "end_turn"
    assert state["modes"]["currentModeId"] == "plan"
    assert {o["id"]: o for o in state["configOptions"]}["model"]["currentValue"] == "openai:other"
    assert fake_llm.requests[-1]["json"]["model"] == "other"
    assert "Fix the thing" in str(fake_llm.requests[-1]["json"]["messages"])


def test_session_list_filters_by_cwd_newest_first_with_cursor_paging(tmp_path: Path, fake_llm) -> None:
    other = tmp_path / "other"
    other.mkdir()
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        lone = ed.new_session(other)
        made = [ed.new_session() for _ in range(51)]
        first = ed.request("session/list", {"cwd": str(ed.project)})
        second = ed.request("session/list", {"cwd": str(ed.project), "cursor": first["nextCursor"]})
        everything = ed.request("session/list", {})
        only_other = ed.request("session/list", {"cwd": str(other)})
        err = ed.error("session/list", {"cursor": "not-a-cursor"})
    assert len(first["sessions"]) == 50 and len(second["sessions"]) == 1
    assert "nextCursor" not in second or second["nextCursor"] is None
    listed = [s["sessionId"] for s in first["sessions"] + second["sessions"]]
    assert listed == made[::-1]  # newest first, nothing twice, nothing lost
    assert all(s["cwd"] == str(ed.project) for s in first["sessions"])
    stamps = [s["updatedAt"] for s in first["sessions"]]
    assert stamps == sorted(stamps, reverse=True)
    assert [s["sessionId"] for s in only_other["sessions"]] == [lone]
    assert len(everything["sessions"]) == 50 and everything["nextCursor"]
    assert err.code == -32602


def test_session_close_frees_the_session(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        assert ed.request("session/close", {"sessionId": sid}) == {}
        err = ed.error("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
        assert err.code == -32002
        # Closed, not deleted: it can be loaded again.
        ed.request("session/resume", {"sessionId": sid, "cwd": str(ed.project)})
        assert ed.prompt(sid, "back")["stopReason"] == "end_turn"


def test_kill_9_mid_turn_keeps_every_committed_message(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([
        {"text": "Before the crash.", "tool_calls": [call("terminal", command="sleep 30")]},
    ])
    ed = Editor(tmp_path, fake_llm, permission="allow_once")
    ed.initialize()
    sid = ed.new_session()
    ed.send_prompt(sid, "Run the slow thing")
    ed.wait_for(lambda: ed.terminals, what="the terminal")
    ed.kill9()
    ed.close(check=True)
    db = sqlite3.connect(ed.home / "sessions.db")
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    db.close()

    fake_llm.script([{"text": "After the crash."}])
    with Editor(tmp_path, fake_llm) as ed2:
        ed2.initialize()
        ed2.request("session/load", {"sessionId": sid, "cwd": str(ed.project), "mcpServers": []})
        replayed = ed2.updates(sid)
        assert ed2.prompt(sid, "Again")["stopReason"] == "end_turn"
    kinds = [u["sessionUpdate"] for u in replayed]
    assert kinds[:3] == ["user_message_chunk", "agent_message_chunk", "tool_call"]
    assert replayed[0]["content"]["text"] == "Run the slow thing"
    assert replayed[1]["content"]["text"] == "Before the crash."
    assert replayed[2]["status"] == "failed"  # it never finished
    # The model is never sent a tool call without its result (providers reject that).
    history = fake_llm.requests[-1]["json"]["messages"]
    asked = [c["id"] for m in history for c in m.get("tool_calls") or ()]
    answered = [m["tool_call_id"] for m in history if m["role"] == "tool"]
    assert asked == answered == [replayed[2]["toolCallId"]]


def test_the_kernel_and_checkpoints_warm_once_the_answer_is_out(tmp_path: Path, fake_llm) -> None:
    """`session/new` answers before the execute_code kernel is spawned and the checkpoints'
    index primed (they held the answer up); both still happen before any prompt."""
    import json

    from talaria.agent.checkpoints.shadow import ShadowRepo
    from talaria.tools.procs import PART

    with Editor(tmp_path, fake_llm) as ed:
        (ed.project / "a.txt").write_text("alpha\n")
        ed.initialize()
        ed.new_session()
        records = ed.home / "run" / "pgroups"
        ed.wait_for(lambda: records.is_dir() and any(
            json.loads(r.read_text()).get("kind") == "execute_code"
            for r in records.iterdir() if not r.name.endswith(PART)), what="the prestarted kernel")
        index = ShadowRepo(ed.home, ed.project).git_dir / "index"
        ed.wait_for(index.exists, what="the checkpoints' index")
