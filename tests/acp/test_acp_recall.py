"""Issue 23, item 2, end to end through a real `talaria acp`: in one process, project A reads
~/.ssh/id_rsa and .env with the user's allow; project B in dont_ask cannot reach A's sessions
with session_search(scope="all"), sees nothing of A with scope="project", and after the user
approves (default mode) gets A's sessions without the key's canary or the password; a new
process loading A replays what the user saw."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.acp_harness import Editor

CANARY = "SSH-CANARY-8c9d0e1f2a3b"
PASSWORD = "hunter2-k7v6q"
KEY = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
       f"-----END OPENSSH PRIVATE KEY-----\n{CANARY}\n")


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def seen_results(fake_llm: Any) -> list[dict[str, Any]]:
    """The tool results the model was sent in its last request, newest turn's last."""
    messages = fake_llm.requests[-1]["json"]["messages"]
    return [json.loads(m["content"]) for m in messages if m["role"] == "tool"]


def test_recall_across_projects_asks_refuses_and_never_carries_secrets(tmp_path: Path,
                                                                        fake_llm: Any) -> None:
    user = tmp_path / "user"
    (user / ".ssh").mkdir(parents=True)
    (user / ".ssh" / "id_rsa").write_text(KEY)
    a, b = tmp_path / "a", tmp_path / "b"
    for project in (a, b):
        project.mkdir()
    (a / ".env").write_text(f"SECRET=abc123\ndb_password={PASSWORD}\n")
    search_all = call("session_search", query="SSH", scope="all")
    fake_llm.script([
        {"tool_calls": [call("read_file", path="~/.ssh/id_rsa"), call("read_file", path=".env")]},
        {"text": f"Both are there: the key says {CANARY}, the password is {PASSWORD}."},
        {"tool_calls": [search_all, call("session_search", query="SSH")]},
        {"text": "Nothing I may read."},
        {"tool_calls": [search_all, call("session_search", query="env", scope="all", role_filter="tool")]},
        {"text": "Found it."},
    ])
    with Editor(tmp_path, fake_llm, project=a, env={"HOME": str(user)}) as ed:
        ed.initialize()
        sid_a = ed.new_session(a)
        assert ed.prompt(sid_a, "check my SSH key and .env")["stopReason"] == "end_turn"
        asked_in_a = len(ed.permission_requests)
        assert asked_in_a == 2  # both are secrets: the user allowed each
        assert CANARY in json.dumps(seen_results(fake_llm))  # the live session reads them

        sid_b = ed.new_session(b)
        ed.request("session/set_mode", {"sessionId": sid_b, "modeId": "dont_ask"})
        assert ed.prompt(sid_b, "what did we do in other projects?")["stopReason"] == "end_turn"
        refused, mine = seen_results(fake_llm)
        assert refused.get("rejected") and "dont_ask" in refused["error"], refused
        assert mine["count"] == 0 and sid_a not in json.dumps(mine)
        assert len(ed.permission_requests) == asked_in_a  # dont_ask never asks

        ed.request("session/set_mode", {"sessionId": sid_b, "modeId": "default"})
        assert ed.prompt(sid_b, "and now, with my approval?")["stopReason"] == "end_turn"
        found = seen_results(fake_llm)[-2:]
        text = json.dumps(found)
        assert all("error" not in r for r in found), found
        assert sid_a in text and "sensitive read withheld" in text
        assert CANARY not in text and PASSWORD not in text and "abc123" not in text
        asks = ed.permission_requests[asked_in_a:]  # allow_once: each call is asked
        assert len(asks) == 2 and all("all projects" in q["toolCall"]["title"] for q in asks), asks

    with Editor(tmp_path, fake_llm, project=a, env={"HOME": str(user)}) as ed:
        ed.initialize()
        load = ed.send("session/load", {"sessionId": sid_a, "cwd": str(a), "mcpServers": []})
        ed.result(load)
        ed.sync()
        replayed = json.dumps(ed.updates(sid_a, "tool_call"))
        assert CANARY in replayed  # session/load shows what the user saw
