"""session/load of transcripts Talaria did not write itself (issue 29): a tool call in the
OpenAI wire shape loads as Talaria's own; a row that cannot be read is a notice in its place
and the rest loads, through a real `talaria acp` and its SQLite store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from tests.acp_harness import AGENT_TO_CLIENT, Editor


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def rows(db: sqlite3.Connection, sid: str) -> list[tuple[int, dict[str, Any]]]:
    found = db.execute("SELECT seq, message FROM messages WHERE session_id = ? ORDER BY seq", (sid,))
    return [(seq, json.loads(text)) for seq, text in found]


def rewrite(home: Path, sid: str) -> tuple[int, int]:
    """As another writer left it: the read's call in the OpenAI wire shape (arguments as JSON
    text), the command's call as an object (arguments not as text), a call with no name, and
    a row that is not JSON. Returns the seqs of the last two."""
    db = sqlite3.connect(home / "sessions.db")
    calls = [(seq, m) for seq, m in rows(db, sid) if m.get("tool_calls")]
    (read_seq, read), (cmd_seq, cmd), (bad_seq, bad) = calls
    read["tool_calls"] = [{"id": c["id"], "type": "function",
                           "function": {"name": c["name"], "arguments": c["arguments"]}}
                          for c in read["tool_calls"]]
    cmd["tool_calls"] = [{"id": c["id"], "type": "function",
                          "function": {"name": c["name"], "arguments": json.loads(c["arguments"])}}
                         for c in cmd["tool_calls"]]
    bad["tool_calls"] = [{"id": c["id"], "type": "function", "function": {"arguments": "{}"}}
                         for c in bad["tool_calls"]]
    last_seq = rows(db, sid)[-1][0]
    for seq, message in ((read_seq, read), (cmd_seq, cmd), (bad_seq, bad)):
        db.execute("UPDATE messages SET message = ? WHERE session_id = ? AND seq = ?",
                   (json.dumps(message), sid, seq))
    db.execute("UPDATE messages SET message = ? WHERE session_id = ? AND seq = ?",
               ('{"role": "assistant", "content": "All do', sid, last_seq))
    db.commit()
    db.close()
    return bad_seq, last_seq


def test_wire_shaped_calls_load_and_an_unreadable_row_is_refused_alone(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([
        {"text": "Reading.", "tool_calls": [call("read_file", path="a.txt")]},
        {"tool_calls": [call("terminal", command="echo from-the-terminal")]},
        {"tool_calls": [call("todo", todos=[{"id": "1", "content": "Lost plan", "status": "pending"}])]},
        {"text": "All done."},
    ])
    with Editor(tmp_path, fake_llm, permission="allow_once") as ed:
        (ed.project / "a.txt").write_text("alpha\n")
        ed.initialize()
        sid = ed.new_session()
        assert ed.prompt(sid, "Fix the thing")["stopReason"] == "end_turn"
        home, project = ed.home, ed.project
    bad_seq, broken_seq = rewrite(home, sid)

    fake_llm.script([{"text": "Second answer."}])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        load_id = ed.send("session/load", {"sessionId": sid, "cwd": str(project), "mcpServers": []})
        ed.result(load_id)  # an answer, not an internal error
        transcript = ed.transcript()
        answered = next(i for i, (d, m) in enumerate(transcript)
                        if m.get("id") == load_id and d == AGENT_TO_CLIENT)
        replayed = [m["params"]["update"] for _, m in transcript[:answered]
                    if m.get("method") == "session/update"]
        assert ed.prompt(sid, "And now?")["stopReason"] == "end_turn"

    calls = [u for u in replayed if u["sessionUpdate"] == "tool_call"]
    assert [(c["kind"], c["rawInput"]) for c in calls] == [
        ("read", {"path": "a.txt"}), ("execute", {"command": "echo from-the-terminal"})]
    assert all(c["status"] == "completed" for c in calls)
    assert calls[0]["locations"] == [{"path": str(project / "a.txt")}]
    notices = [u["content"]["text"] for u in replayed if u["sessionUpdate"] == "agent_message_chunk"
               and "could not be read" in u["content"]["text"]]
    assert len(notices) == 2
    assert f"Stored message {bad_seq} " in notices[0] and "tool call 1 has no name" in notices[0]
    assert f"Stored message {broken_seq} " in notices[1] and "not JSON" in notices[1]
    assert "All do" not in json.dumps(replayed)

    # The model gets the rest back, the calls in its wire shape, no result without its call.
    history = fake_llm.requests[-1]["json"]["messages"]
    sent = [c["function"] for m in history for c in m.get("tool_calls") or ()]
    assert [(c["name"], json.loads(c["arguments"])) for c in sent] == [
        ("read_file", {"path": "a.txt"}), ("terminal", {"command": "echo from-the-terminal"})]
    ids = {c["id"] for m in history for c in m.get("tool_calls") or ()}
    assert all(m["tool_call_id"] in ids for m in history if m["role"] == "tool")
    assert "Lost plan" not in json.dumps(history) and "And now?" in json.dumps(history)


def test_a_replay_across_pages_shows_every_call_once_with_its_result(tmp_path: Path) -> None:
    """`history.PAGE_ROWS` rows at a time: a call at a page's end and its result at the next
    page's start still replay as one card with the result's status, in order."""
    import anyio

    from talaria.acp_server.history import PAGE_ROWS, replay
    from talaria.agent.store import Store

    store = Store(tmp_path / "s.db")
    store.create_session("s", str(tmp_path), model=None, mode=None)
    store.append("s", {"role": "user", "content": "go"})
    ids = [f"c{i}" for i in range(PAGE_ROWS + 2)]  # two rows each: the page edges fall everywhere
    for n, call_id in enumerate(ids):
        store.append("s", {"role": "assistant", "content": "", "tool_calls": [
            {"id": call_id, "name": "terminal", "arguments": json.dumps({"command": f"echo {n}"})}]})
        store.append("s", {"role": "tool", "tool_call_id": call_id, "name": "terminal",
                           "status": "completed", "content": json.dumps({"output": f"{n}\n"})})
    sent: list[dict[str, Any]] = []

    async def send(update: dict[str, Any]) -> None:
        sent.append(update)

    anyio.run(lambda: replay(store, "s", {}, send))
    cards = [u for u in sent if u["sessionUpdate"] == "tool_call"]
    assert [c["toolCallId"] for c in cards] == ids
    assert {c["status"] for c in cards} == {"completed"}
    assert sent[0]["sessionUpdate"] == "user_message_chunk"
