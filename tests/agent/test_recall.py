"""`session_search` over the real SQLite store: discovery, scroll, scope, bad input, secrets,
and an old database indexed on open."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from talaria.agent.loop import run_turn
from talaria.agent.recall import MAX_LIMIT, MAX_WINDOW, RecallError, session_search
from talaria.agent.store import MAX_INDEXED_CHARS, SCHEMA_VERSION, Store
from tests.helpers import make_session, recorded

PROJECT, OTHER = "/work/project", "/work/other"


def fill(store: Store, sid: str, cwd: str, texts: list[str], *, title: str | None = None) -> None:
    store.create_session(sid, cwd, model="m", mode="default")
    store.append(sid, {"role": "system", "content": "You are Talaria."})
    for i, text in enumerate(texts):
        store.append(sid, {"role": "user" if i % 2 == 0 else "assistant", "content": text})
    if title:
        store.update_session(sid, title=title)


def search(store: Store, current: str = "now", cwd: str = PROJECT, **args: Any) -> dict[str, Any]:
    return session_search(store, args, cwd=Path(cwd), session_id=current)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "sessions.db")
    fill(store, "net", PROJECT, ["the docker networking test is flaky", "use a user-defined bridge",
                                 "thanks, the bridge works"], title="Docker networking")
    fill(store, "css", PROJECT, ["center a div", "use flexbox"], title="CSS")
    fill(store, "far", OTHER, ["docker networking in the other project"])
    return store


def test_discovery_finds_the_session_with_a_snippet_and_the_messages_around(store: Store) -> None:
    found = search(store, query="docker networking")
    assert found["count"] == 1  # the other project's session is out of scope
    [hit] = found["results"]
    assert hit["session_id"] == "net" and hit["title"] == "Docker networking"
    assert ">>>docker<<<" in hit["snippet"] and hit["match_message_id"] == 2
    assert [m["id"] for m in hit["messages"]] == [2, 3, 4]  # the system prompt is not shown
    assert hit["messages"][1] == {"id": 3, "role": "assistant", "content": "use a user-defined bridge"}


def test_scope_all_reaches_every_project_and_sort_orders_by_time(store: Store) -> None:
    found = search(store, query="docker", scope="all", sort="newest")
    assert [r["session_id"] for r in found["results"]] == ["far", "net"]
    found = search(store, query="docker", scope="all", sort="oldest")
    assert [r["session_id"] for r in found["results"]] == ["net", "far"]


def test_the_current_session_is_left_out(store: Store) -> None:
    assert search(store, current="net", query="bridge")["results"] == []
    assert "hint" in search(store, current="net", query="bridge")


def test_scroll_returns_the_window_and_says_where_the_edges_are(store: Store) -> None:
    page = search(store, session_id="net", around_message_id=3, window=1)
    assert [m["id"] for m in page["messages"]] == [2, 3, 4]
    assert (page["messages_before"], page["messages_after"], page["last_message_id"]) == (1, 1, 4)
    end = search(store, session_id="net", around_message_id=4, window=5)
    assert end["messages_after"] == 0 and end["messages_before"] == 3


@pytest.mark.parametrize(("args", "says"), [
    ({"session_id": "nope", "around_message_id": 1}, "no session 'nope'"),
    ({"session_id": "net", "around_message_id": 99}, "has messages 1 to 4"),
    ({"session_id": "net"}, "needs around_message_id"),
    ({"session_id": "far", "around_message_id": 1}, "another project"),
    ({"query": "x", "limit": "many"}, "limit must be a whole number"),
    ({"query": "x", "sort": "sideways"}, "sort must be one of"),
    ({"query": "x", "role_filter": "system"}, "role_filter takes"),
    ({"query": "((( ***"}, "no words"),
    ({"query": "NOT"}, "no words"),
])
def test_bad_input_gets_a_clear_error_and_changes_nothing(store: Store, tmp_path: Path,
                                                          args: dict[str, Any], says: str) -> None:
    before = (tmp_path / "sessions.db").read_bytes()
    with pytest.raises(RecallError, match=says):
        search(store, **args)
    assert (tmp_path / "sessions.db").read_bytes() == before


@pytest.mark.parametrize("query", ['docker "networking', "docker AND", "docker (", "bridge)*", "OR bridge"])
def test_a_query_fts5_cannot_parse_falls_back_to_its_words(store: Store, query: str) -> None:
    found = search(store, query=query)
    assert "not valid FTS5 syntax" in found["note"]
    if "docker" in query or "bridge" in query:
        assert found["results"], found


def test_limits_are_clamped(store: Store) -> None:
    for i in range(MAX_LIMIT + 3):
        fill(store, f"s{i}", PROJECT, [f"needle {i}"])
    assert len(search(store, query="needle", limit=50)["results"]) == MAX_LIMIT
    long = [f"message {i}" for i in range(60)]
    fill(store, "long", PROJECT, long)
    page = search(store, session_id="long", around_message_id=30, window=500)
    assert len(page["messages"]) == 2 * MAX_WINDOW + 1


def test_roles_default_to_the_conversation_and_tool_output_on_request(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    store.create_session("t", PROJECT, model="m", mode="default")
    store.append("t", {"role": "user", "content": "run the tests"})
    store.append("t", {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "name": "terminal", "arguments": json.dumps({"command": "pytest -q"})}]})
    store.append("t", {"role": "tool", "name": "terminal", "tool_call_id": "c1",
                       "content": "FAILED test_segfault_handler"})
    assert search(store, query="segfault")["results"] == []
    [hit] = search(store, query="segfault", role_filter="tool")["results"]
    assert hit["match_message_id"] == 3 and hit["messages"][-1]["tool"] == "terminal"
    assert search(store, query="pytest")["results"][0]["match_message_id"] == 2  # the call's args


def test_secrets_are_neither_indexed_nor_shown(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    key = "sk-proj-" + "A1b2C3d4" * 4
    fill(store, "k", PROJECT, [f"my key is OPENAI_API_KEY={key} please deploy", "deploying"])
    hit = search(store, query="deploy*")["results"][0]
    assert key not in json.dumps(hit) and "[REDACTED]" in json.dumps(hit)
    indexed = sqlite3.connect(tmp_path / "s.db").execute("SELECT text FROM messages_fts").fetchall()
    assert not any(key in text for (text,) in indexed)
    assert search(store, query=key[:20].replace("-", " "))["results"] == []


def test_a_huge_message_is_indexed_up_to_the_bound(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    fill(store, "big", PROJECT, ["alpha " * (MAX_INDEXED_CHARS // 6 + 1000) + "omega"])
    assert search(store, query="alpha")["results"] and not search(store, query="omega")["results"]


def test_a_database_from_before_the_index_is_indexed_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    fill(Store(path), "old", PROJECT, ["the migration test needle"])
    db = sqlite3.connect(path)  # as an older Talaria left it: no index, version 0
    db.execute("DROP TABLE messages_fts")
    db.execute("PRAGMA user_version = 0")
    db.commit()
    db.close()
    reopened = Store(path)
    assert search(reopened, query="needle")["results"][0]["session_id"] == "old"
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    Store(path)  # opened again: not indexed twice
    assert sqlite3.connect(path).execute("SELECT count(*) FROM messages_fts").fetchone() == (1,)


def test_browse_without_arguments_lists_recent_sessions(store: Store) -> None:
    recent = search(store)["recent"]
    assert {r["session_id"] for r in recent} == {"net", "css"}


def test_the_model_searches_past_sessions_through_the_loop(fake_llm: Any, tmp_path: Path) -> None:
    store = Store(tmp_path / "sessions.db")
    project = tmp_path / "project"
    project.mkdir()
    fill(store, "past", str(project), ["why does the cache key collide?", "hash the full path"],
         title="Cache keys")
    fake_llm.script([
        {"tool_calls": [{"name": "session_search", "arguments": {"query": "cache key"}}]},
        {"text": "We hashed the full path last time."},
    ])
    session = make_session(fake_llm, tmp_path, store=store, mode="default")  # no question asked
    assert anyio.run(run_turn, session, "what did we decide about cache keys?") == "end_turn"
    result = json.loads(next(m for m in session.messages if m.get("role") == "tool")["content"])
    assert result["results"][0]["session_id"] == "past"
    assert "hash the full path" in json.dumps(result)
    started = [e for e in recorded(session).events if type(e).__name__ == "ToolCallStarted"]
    assert started[0].kind == "search"


def test_without_a_store_the_tool_is_not_offered(fake_llm: Any, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path, store=None)
    assert session.tool("session_search") is None


def test_a_deleted_session_leaves_the_index_and_a_fork_joins_it(store: Store) -> None:
    store.copy_session("net", "fork")
    found = {r["session_id"] for r in search(store, query="bridge")["results"]}
    assert found == {"net", "fork"}
    page = search(store, session_id="fork", around_message_id=3, window=1)
    assert [m["content"] for m in page["messages"] if m["id"] == 3] == ["use a user-defined bridge"]
    assert store.delete_session("net")
    assert {r["session_id"] for r in search(store, query="bridge")["results"]} == {"fork"}
