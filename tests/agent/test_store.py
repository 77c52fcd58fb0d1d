"""The SQLite session store."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from talaria.agent.store import Store


def test_append_is_committed_at_once(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    store.create_session("s1", "/p", model="openai:x", mode="default")
    store.append("s1", {"role": "user", "content": "héllo ✓"})
    # A second connection (another process would do the same) sees it without any close.
    other = sqlite3.connect(tmp_path / "s.db")
    assert other.execute("SELECT count(*) FROM messages").fetchone() == (1,)
    assert other.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert store.messages("s1") == [{"role": "user", "content": "héllo ✓"}]


def test_context_snapshots_keep_the_whole_transcript(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    store.create_session("s1", "/p", model=None, mode=None)
    for i in range(4):
        store.append("s1", {"role": "user", "content": str(i)})
    store.save_context("s1", [{"role": "user", "content": "summary of 0-3"}])
    store.append("s1", {"role": "event", "type": "compaction"})
    store.append("s1", {"role": "user", "content": "4"})
    assert [m["content"] for m in store.context("s1")] == ["summary of 0-3", "4"]
    assert store.messages("s1", include_archived=False) == store.context("s1")
    assert [m.get("content") for m in store.messages("s1")] == ["0", "1", "2", "3", None, "4"]


def test_list_sessions_newest_first_with_cursor(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    for i in range(5):
        store.create_session(f"s{i}", "/a" if i % 2 == 0 else "/b", model=None, mode=None)
        time.sleep(0.002)
    page = store.list_sessions(cwd="/a", limit=2)
    assert [r.id for r in page] == ["s4", "s2"]
    rest = store.list_sessions(cwd="/a", before=(page[-1].updated_at, page[-1].id), limit=2)
    assert [r.id for r in rest] == ["s0"]
    store.update_session("s0", title="renamed")
    assert store.list_sessions(limit=1)[0].id == "s0"
    assert store.get_session("s0").title == "renamed"
    assert store.get_session("nope") is None


def test_paging_never_skips_sessions_updated_together(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    for i in range(5):
        store.create_session(f"s{i}", "/a", model=None, mode=None)
    store._db.execute("UPDATE sessions SET updated_at = 1000.0")  # all in the same instant
    seen, before = [], None
    while page := store.list_sessions(before=before, limit=2):
        seen += [r.id for r in page]
        before = (page[-1].updated_at, page[-1].id)
    assert seen == ["s4", "s3", "s2", "s1", "s0"]


def test_rows_of_other_writers_read_and_unreadable_ones_stand_alone(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    store.create_session("s1", "/p", model=None, mode=None)
    wire = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": {"path": "a"}}}
    store.save_context("s1", [{"role": "assistant", "content": None, "tool_calls": [wire]},
                              {"role": "tool", "tool_call_id": "c1", "content": "alpha"},
                              {"role": "tool", "content": "no call id"}])
    db = sqlite3.connect(tmp_path / "s.db")  # as another writer left them
    for seq, bad in enumerate(({"role": "assistant", "tool_calls": [{"id": "c2", "function": {}}]},
                               {"role": "assistant", "tool_calls": "not a list"},
                               ["not", "a", "message"]), 1):
        db.execute("INSERT INTO messages (session_id, seq, created_at, message) VALUES ('s1', ?, 0, ?)",
                   (seq, json.dumps(bad)))
    db.commit()
    db.close()
    store.append("s1", {"role": "tool", "tool_call_id": "c2", "content": "its call was unreadable"})
    store.append("s1", {"role": "user", "content": "next"})
    context = store.context("s1")
    assert context[0]["tool_calls"] == [{"id": "c1", "name": "read_file", "arguments": '{"path": "a"}'}]
    assert [m.get("content") for m in context[1:]] == ["alpha", "next"]  # no result without its call
    events = [m for m in store.messages("s1") if m["role"] == "event"]
    assert [(e["type"], e["seq"]) for e in events] == [("unreadable", 1), ("unreadable", 2), ("unreadable", 3)]
    assert [e["error"] for e in events] == ["tool call 1 has no name", "its tool_calls is not a list",
                                            "not a message (a JSON object with a role)"]


def test_a_transcript_longer_than_a_page_reads_whole_and_in_order(tmp_path: Path) -> None:
    """`LOAD_PAGE` rows per query: the transcript and the live context across page edges, a
    snapshot in the middle of one; the heap handed back after (`release_memory`)."""
    from talaria.agent.store_read import LOAD_PAGE

    store = Store(tmp_path / "s.db")
    store.create_session("s", "/p", model=None, mode=None)
    rows = [{"role": "user", "content": f"message {i}"} for i in range(2 * LOAD_PAGE + 3)]
    for row in rows:
        store.append("s", row)
    assert store.messages("s") == rows
    store.save_context("s", rows[:LOAD_PAGE + 1])
    later = [{"role": "user", "content": f"later {i}"} for i in range(LOAD_PAGE + 1)]
    for row in later:
        store.append("s", row)
    assert store.messages("s", include_archived=False) == rows[:LOAD_PAGE + 1] + later
    store.release_memory()
    assert store.messages("s") == rows + later


def test_no_read_waits_for_a_write_or_another_read(tmp_path: Path) -> None:
    """Reads have a connection per thread: while a write is in progress (the writer's lock
    held, as a 1 MB message holds it) and while another thread is in the middle of a read
    (its transaction open, as a page of megabytes keeps it), listing sessions, reading one's
    record and its transcript go on, and see every message committed before them."""
    import threading

    store = Store(tmp_path / "s.db")
    store.create_session("s", "/p", model=None, mode=None)
    store.append("s", {"role": "user", "content": "first"})
    reading, finish = threading.Event(), threading.Event()

    def long_read() -> None:
        db = store.reads.connection()
        db.execute("BEGIN")
        db.execute("SELECT message FROM messages").fetchone()
        reading.set()
        finish.wait(30)
        db.execute("COMMIT")

    reader = threading.Thread(target=long_read, daemon=True)
    reader.start()
    assert reading.wait(30)
    store.append("s", {"role": "user", "content": "second"})  # writes go on during a read
    done = threading.Event()

    def reads() -> None:
        assert [r.id for r in store.list_sessions()] == ["s"]
        assert store.get_session("s") is not None
        assert [m["content"] for m in store.messages("s")] == ["first", "second"]
        done.set()

    with store._lock:  # a write in progress
        threading.Thread(target=reads, daemon=True).start()
        assert done.wait(30), "a read waited"
    finish.set()
    reader.join(30)
    store.close()
