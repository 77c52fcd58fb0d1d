"""Recall is a read: `session_search` reaching other projects asks or is refused like any read
outside the project, whichever route the call takes (a direct call, an execute_code script, a
subagent); and what secret paths held never comes back through it (issue 23, item 2)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from talaria.agent.loop import run_turn
from talaria.agent.permissions import PermissionAsk
from talaria.agent.session import Session
from talaria.agent.store import Store
from talaria.agent.tool_runner import call_nested
from tests.agent.test_subagents import delegate, goal_of, router, tools_done
from tests.helpers import make_session

CANARY = "SSH-CANARY-5d41402abc4b2a76"
PASSWORD = "hunter2-9f8e7d"
KEY = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
       f"-----END OPENSSH PRIVATE KEY-----\n# {CANARY}\n")


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


class Asker:
    """Answers permission questions by kind and keeps every question."""

    def __init__(self, **answers: str) -> None:
        self.answers, self.asked = answers, []  # type: ignore[var-annotated]

    async def __call__(self, ask: PermissionAsk) -> str:
        self.asked.append(ask)
        return self.answers.get(ask.kind, "allow_once")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "userhome"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(KEY)
    monkeypatch.setenv("HOME", str(home))
    return home


def project_a(fake_llm: Any, tmp_path: Path, store: Store) -> Session:
    """Project A: the user allows reading ~/.ssh/id_rsa and .env, and the model reads them."""
    session = make_session(fake_llm, _root(tmp_path, "A"), store=store, mode="default", asker=Asker())
    (session.cwd / ".env").write_text(f"SECRET=abc123\ndb_password={PASSWORD}\n")
    fake_llm.script([{"tool_calls": [call("read_file", path="~/.ssh/id_rsa"),
                                     call("read_file", path=".env")]},
                     {"text": f"Your key ends with {CANARY} and db_password is {PASSWORD}."}])
    assert anyio.run(run_turn, session, "check my SSH key and .env") == "end_turn"
    return session


def _root(tmp_path: Path, name: str) -> Path:
    (tmp_path / name).mkdir(exist_ok=True)
    return tmp_path / name


def results(session: Session) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in session.messages if m.get("role") == "tool"]


def searches(fake_llm: Any, session: Session, *calls: dict[str, Any]) -> list[dict[str, Any]]:
    fake_llm.script([{"tool_calls": list(calls)}, {"text": "ok"}])
    before = len(results(session))
    assert anyio.run(run_turn, session, "what did we do elsewhere?") == "end_turn"
    return results(session)[before:]


def test_the_issue_example_other_projects_are_refused_in_dont_ask_and_secrets_never_return(
        fake_llm: Any, tmp_path: Path, home: Path) -> None:
    store = Store(tmp_path / "sessions.db")
    a = project_a(fake_llm, tmp_path, store)
    live = json.dumps(results(a))
    assert CANARY in live and PASSWORD in live  # the live session keeps what the user saw
    asker = Asker()
    b = make_session(fake_llm, _root(tmp_path, "B"), store=store, mode="dont_ask", asker=asker)
    refused, mine = searches(fake_llm, b, call("session_search", query="SSH", scope="all"),
                             call("session_search", query="SSH"))
    assert refused["rejected"] and "dont_ask" in refused["error"]
    assert str(store.path) in refused["error"]  # the read outside the project is named
    assert mine["count"] == 0 and a.id not in json.dumps(mine)
    assert asker.asked == []
    # Approved in default mode: A's sessions come back, its secrets do not.
    b.permissions.mode = "default"
    found = searches(fake_llm, b, call("session_search", query="SSH", scope="all"),
                     call("session_search", query="env", scope="all", role_filter="tool"),
                     call("session_search", session_id=a.id, around_message_id=3, window=10,
                          scope="all"))
    text = json.dumps(found)
    assert a.id in text and CANARY not in text and PASSWORD not in text and "abc123" not in text
    assert "[content of a sensitive read withheld: " + str(home / ".ssh" / "id_rsa") + "]" in text
    [ask, *_] = asker.asked
    assert ask.paths == (str(store.path),) and "all projects" in ask.title
    # The session's own transcript (session/load, the raw transcript) still holds it.
    assert CANARY in json.dumps(store.messages(a.id))
    index = sqlite3.connect(store.path).execute("SELECT text FROM messages_fts").fetchall()
    assert not any(CANARY in t or PASSWORD in t for (t,) in index)


def test_plan_mode_reads_but_other_projects_still_ask(fake_llm: Any, tmp_path: Path) -> None:
    store = Store(tmp_path / "sessions.db")
    asker = Asker(search="reject_once")
    b = make_session(fake_llm, _root(tmp_path, "B"), store=store, mode="plan", asker=asker)
    other, mine = searches(fake_llm, b, call("session_search", query="x", scope="all"),
                           call("session_search", query="x"))
    assert other["rejected"] and "error" not in mine
    assert [a.paths for a in asker.asked] == [(str(store.path),)]


def test_allow_always_holds_for_the_session_and_own_sessions_never_ask(fake_llm: Any,
                                                                       tmp_path: Path) -> None:
    store = Store(tmp_path / "sessions.db")
    asker = Asker(search="allow_always")
    b = make_session(fake_llm, _root(tmp_path, "B"), store=store, mode="default", asker=asker)
    first = searches(fake_llm, b, call("session_search", query="x", scope="all"))
    again = searches(fake_llm, b, call("session_search", query="y", scope="all"),
                     call("session_search", session_id=b.id, around_message_id=1, scope="all"))
    assert all("error" not in r for r in first + again), first + again
    assert len(asker.asked) == 1
    b.permissions.mode = "dont_ask"  # remembered: dont_ask runs what was allowed always
    assert "error" not in searches(fake_llm, b, call("session_search", query="z", scope="all"))[0]


def test_a_script_cannot_reach_recall_and_nested_dispatch_judges_it_the_same(
        fake_llm: Any, tmp_path: Path) -> None:
    store = Store(tmp_path / "sessions.db")
    asker = Asker(search="reject_once")
    b = make_session(fake_llm, _root(tmp_path, "B"), store=store, mode="default", asker=asker)
    code = ("import json, hermes_tools\n"
            "print(json.dumps(hermes_tools._call('session_search', {'query': 'SSH', 'scope': 'all'})))")
    [script] = searches(fake_llm, b, call("execute_code", code=code))
    inner = json.loads(script["output"].strip().splitlines()[-1])
    assert "cannot be called from execute_code" in inner["error"] and script["tool_calls"] == 0
    # Were scripts given session_search, their calls take this same path: planned, judged.
    nested = anyio.run(call_nested, b, "session_search", {"query": "SSH", "scope": "all"})
    assert nested.get("rejected"), nested
    assert [a.paths for a in asker.asked if a.kind == "search"] == [(str(store.path),)]


def test_a_subagent_calling_session_search_is_judged_the_same(fake_llm: Any, tmp_path: Path) -> None:
    store = Store(tmp_path / "sessions.db")
    b = make_session(fake_llm, _root(tmp_path, "B"), store=store, mode="dont_ask", asker=Asker())
    seen: list[dict[str, Any]] = []

    def story(done: int) -> dict[str, Any]:
        if done == 0:
            return {"tool_calls": [call("session_search", query="SSH", scope="all"),
                                   call("session_search", query="SSH")]}
        return {"text": "searched"}

    def respond(body: dict[str, Any]) -> dict[str, Any] | None:
        if goal_of(body) == "look" and tools_done(body) == 2:
            seen.extend(json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool")
        return router({"look": story})(body)

    fake_llm.respond = respond
    fake_llm.script([delegate("look"), {"text": "done"}])
    assert anyio.run(run_turn, b, "search through a subagent") == "end_turn"
    refused, mine = seen
    assert refused["rejected"] and "dont_ask" in refused["error"]
    assert "error" not in mine and mine["count"] == 0  # the child searches the parent's project
