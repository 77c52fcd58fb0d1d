"""The session store: SQLite in WAL mode at `$TALARIA_HOME/sessions.db`.

Every message is committed as it is appended, so a crash (even `kill -9`) loses at most the
message in flight, and WAL keeps the database consistent. The `messages` table is the whole
transcript and is never rewritten (it is the trajectory: history, export, training data).
When compaction or /clear changes the live context, the new context is saved as a snapshot in
`contexts`; the live context is that snapshot plus every message appended after it. Rows with
`role = "event"` (compaction records) belong to the transcript only.

`messages_fts` (SQLite FTS5) indexes each message's searchable text (`searchable_text`) under
the message's rowid, written in the same transaction as the message; a database from before it
existed is indexed once when opened (`PRAGMA user_version` 1). `session_search` reads it
through `search` and `around`.

`messages.withheld` names the secret path a tool result's content came from (the message's
`withheld` key, set by `talaria.agent.withheld` when it is stored): such a message is never
indexed, and `around` / `messages` hand the mark back so recall and exports show a note
instead. A database from before the column (`user_version` < 2) gets it, and its stored
results are judged once by the default path policy (`withheld.judge_stored`).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from talaria.agent.store_migrate import migrate
from talaria.agent.store_read import TranscriptReads, loaded
from talaria.agent.transcript import calls_of, text_of
from talaria.tools.redact import WITHHELD, redact_text, scrub

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    cwd TEXT NOT NULL,
    title TEXT,
    model TEXT,
    mode TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    meta TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS messages (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    seq INTEGER NOT NULL,
    created_at REAL NOT NULL,
    message TEXT NOT NULL,
    withheld TEXT,
    PRIMARY KEY (session_id, seq)
);
CREATE INDEX IF NOT EXISTS sessions_by_cwd ON sessions (cwd, updated_at);
CREATE TABLE IF NOT EXISTS contexts (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id),
    upto_seq INTEGER NOT NULL,
    created_at REAL NOT NULL,
    messages TEXT NOT NULL
);
"""
FTS_SCHEMA = """
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
    text, role UNINDEXED, session_id UNINDEXED, seq UNINDEXED, prefix = '2 3'
);
"""
SCHEMA_VERSION = 2
"""`PRAGMA user_version`: 0 before `messages_fts`, 1 with it, 2 with `messages.withheld`."""
SEARCH_ROLES = ("user", "assistant", "tool")
MAX_INDEXED_CHARS = 100_000
"""Text indexed per message (a 5 MB tool result is not worth its index pages)."""

log = logging.getLogger(__name__)


class QueryError(ValueError):
    """An FTS5 query that SQLite cannot parse."""


def searchable_text(message: Mapping[str, Any]) -> str:
    """What `session_search` finds in a message: its text (text blocks of a list content) and
    the names and arguments of the tools it called, with secrets redacted (the index never
    holds one). Nothing for system and event rows."""
    if message.get("role") not in SEARCH_ROLES:
        return ""
    parts = [text_of(message)]
    for call in calls_of(message):
        parts.append(f"{call.get('name', '')} {call.get('arguments', '')}")
    return redact_text("\n".join(p for p in parts if p)[:MAX_INDEXED_CHARS])


@dataclass(frozen=True, slots=True)
class SessionRecord:
    id: str
    cwd: str
    title: str | None
    model: str | None
    mode: str | None
    created_at: float
    updated_at: float
    meta: dict[str, Any]


class Store:
    """Thread-safe (the writing connection and its lock; reads on `reads`, a connection per
    thread: no read waits for a write); calls are short and synchronous."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.executescript("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                                   "PRAGMA busy_timeout=5000;" + SCHEMA)
        except sqlite3.OperationalError as exc:  # say which file ("unable to open database file")
            raise sqlite3.OperationalError(f"{exc}: {path}") from exc
        self._migrate()
        self.reads = TranscriptReads(path)
        """Whole transcripts, on a connection of their own (`store_read`)."""

    def _migrate(self) -> None:
        """Bring an older database to `SCHEMA_VERSION` (once: the version is stored)."""
        with self._lock:
            (version,) = self._db.execute("PRAGMA user_version").fetchone()
            if version >= SCHEMA_VERSION:
                return
            self._db.execute("BEGIN IMMEDIATE")
            try:
                (version,) = self._db.execute("PRAGMA user_version").fetchone()  # another process?
                migrate(self._db, version, fts_schema=FTS_SCHEMA, searchable_text=searchable_text)
                self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def close(self) -> None:
        self.reads.close()
        with self._lock:
            self._db.close()

    def create_session(
        self, session_id: str, cwd: str, *, model: str | None, mode: str | None,
        meta: dict[str, Any] | None = None,
    ) -> None:
        now = time.time()
        with self._lock:
            self._db.execute(
                "INSERT INTO sessions (id, cwd, model, mode, created_at, updated_at, meta)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (session_id, cwd, model, mode, now, now, json.dumps(meta or {})),
            )

    def update_session(self, session_id: str, **fields: Any) -> None:
        """Set `title`, `model`, `mode`; `meta`: its keys replace those stored, others stay."""
        allowed = {"title", "model", "mode", "meta"}
        if not fields or set(fields) - allowed:
            raise ValueError(f"can only update {sorted(allowed)}")
        meta = fields.pop("meta", None) or {}
        sets = [f"{name} = ?" for name in fields] + (
            ["meta = json_set(meta" + ", ?, json(?)" * len(meta) + ")"] if meta else [])
        values = [*fields.values(), *(v for key, value in meta.items()
                                      for v in (f'$."{key}"', json.dumps(value)))]
        with self._lock:
            self._db.execute(f"UPDATE sessions SET {', '.join([*sets, 'updated_at = ?'])} "
                             "WHERE id = ?", (*values, time.time(), session_id))

    def get_session(self, session_id: str) -> SessionRecord | None:
        row = self.reads.connection().execute(
            "SELECT id, cwd, title, model, mode, created_at, updated_at, meta"
            " FROM sessions WHERE id = ?", (session_id,),
        ).fetchone()
        return _record(row) if row else None

    def list_sessions(
        self, *, cwd: str | None = None, before: tuple[float, str] | None = None, limit: int = 50
    ) -> list[SessionRecord]:
        """Newest first. `before` is the (updated_at, id) of the last row of the previous page:
        the id breaks ties, so sessions updated in the same instant are neither lost nor repeated."""
        query = "SELECT id, cwd, title, model, mode, created_at, updated_at, meta FROM sessions"
        clauses: list[str] = []
        args: list[Any] = []
        if cwd is not None:
            clauses.append("cwd = ?")
            args.append(cwd)
        if before is not None:
            clauses.append("(updated_at < ? OR (updated_at = ? AND id < ?))")
            args += [before[0], before[0], before[1]]
        if clauses:
            query += " WHERE " + " AND ".join(clauses)
        query += " ORDER BY updated_at DESC, id DESC LIMIT ?"
        rows = self.reads.connection().execute(query, (*args, limit)).fetchall()
        return [_record(row) for row in rows]

    def append(self, session_id: str, message: Mapping[str, Any],
               quoted: frozenset[str] = frozenset()) -> int:
        """Commit one message; returns its sequence number. `quoted`: words of the session's
        withheld results, kept out of this message's index text (an answer quoting them)."""
        text = json.dumps(message, ensure_ascii=False)
        withheld = message.get(WITHHELD)
        # Redacting the index text takes ~10 ms per 100 KB: not while holding the store.
        found = "" if withheld else scrub(searchable_text(message), quoted)
        now = time.time()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                (seq,) = self._db.execute(
                    "SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE session_id = ?",
                    (session_id,),
                ).fetchone()
                cursor = self._db.execute(
                    "INSERT INTO messages (session_id, seq, created_at, message, withheld)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (session_id, seq, now, text, str(withheld) if withheld else None),
                )
                if found:
                    self._db.execute(
                        "INSERT INTO messages_fts (rowid, text, role, session_id, seq)"
                        " VALUES (?, ?, ?, ?, ?)",
                        (cursor.lastrowid, found, message.get("role"), session_id, seq))
                self._db.execute(
                    "UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id)
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return seq

    def release_memory(self) -> None:
        """Hand back the pages SQLite cached (after a whole transcript was read: ~2 MB)."""
        self.reads.release_memory()
        with self._lock:
            self._db.execute("PRAGMA shrink_memory")

    def messages(self, session_id: str, *, include_archived: bool = True) -> list[dict[str, Any]]:
        """The whole transcript, or with `include_archived=False` the live context."""
        if not include_archived:
            return self.reads.context(session_id)
        return [message for _, message in self.reads.pages(session_id, 0, marks=True)]

    def messages_after(self, session_id: str, seq: int, limit: int = -1, *,
                       marks: bool = True) -> list[tuple[int, dict[str, Any]]]:
        """`TranscriptReads.messages_after`, on the read connection."""
        return self.reads.messages_after(session_id, seq, limit, marks=marks)

    def context(self, session_id: str) -> list[dict[str, Any]]:
        return self.reads.context(session_id)

    def save_context(self, session_id: str, messages: Sequence[Mapping[str, Any]]) -> None:
        """Snapshot the live context as of the last appended message."""
        text = json.dumps(messages, ensure_ascii=False)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                (upto,) = self._db.execute(
                    "SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = ?", (session_id,)
                ).fetchone()
                self._db.execute(
                    "INSERT OR REPLACE INTO contexts (session_id, upto_seq, created_at, messages)"
                    " VALUES (?, ?, ?, ?)", (session_id, upto, time.time(), text),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
    def delete_session(self, session_id: str) -> bool:
        """Remove a session and its transcript; False when there was none."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("DELETE FROM messages_fts WHERE rowid IN"
                                 " (SELECT rowid FROM messages WHERE session_id = ?)", (session_id,))
                for table, key in (("messages", "session_id"), ("contexts", "session_id"),
                                   ("sessions", "id")):
                    cursor = self._db.execute(f"DELETE FROM {table} WHERE {key} = ?", (session_id,))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return cursor.rowcount > 0

    def copy_session(self, source_id: str, new_id: str) -> None:
        """A new session `new_id` with `source_id`'s record, transcript and live context."""
        now = time.time()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    "INSERT INTO sessions (id, cwd, title, model, mode, created_at, updated_at, meta)"
                    " SELECT ?, cwd, title, model, mode, ?, ?, meta FROM sessions WHERE id = ?",
                    (new_id, now, now, source_id))
                self._db.execute(
                    "INSERT INTO messages (session_id, seq, created_at, message, withheld)"
                    " SELECT ?, seq, created_at, message, withheld FROM messages WHERE session_id = ?",
                    (new_id, source_id))
                self._db.execute(  # the copies are searchable too, under their own rowids
                    "INSERT INTO messages_fts (rowid, text, role, session_id, seq)"
                    " SELECT m.rowid, f.text, f.role, ?, f.seq FROM messages_fts f"
                    " JOIN messages s ON s.rowid = f.rowid AND s.session_id = ?"
                    " JOIN messages m ON m.session_id = ? AND m.seq = s.seq",
                    (new_id, source_id, new_id))
                self._db.execute(
                    "INSERT INTO contexts (session_id, upto_seq, created_at, messages)"
                    " SELECT ?, upto_seq, created_at, messages FROM contexts WHERE session_id = ?",
                    (new_id, source_id))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def search(self, query: str, *, roles: tuple[str, ...], cwd: str | None = None,
               exclude: str | None = None, rows: int = 300) -> list[Hit]:
        """The newest `rows` messages matching an FTS5 `query`, best first (bm25); only sessions
        in `cwd` when given, never session `exclude`. Raises QueryError for a bad query.

        Ranking every match of a word that is in most messages costs ~250 ms on 200K messages;
        the newest `rows` matches stream in rowid order and cost a few ms, and a word that
        common says little about relevance anyway."""
        sql = ("SELECT session_id, seq, role, snippet(messages_fts, 0, '>>>', '<<<', '...', 24),"
               " bm25(messages_fts) FROM messages_fts WHERE messages_fts MATCH ?")
        args: list[Any] = [query]
        if roles:
            sql += f" AND role IN ({', '.join('?' * len(roles))})"
            args += roles
        if exclude is not None:
            sql += " AND session_id != ?"
            args.append(exclude)
        if cwd is not None:
            sql += " AND session_id IN (SELECT id FROM sessions WHERE cwd = ?)"
            args.append(cwd)
        sql += " ORDER BY rowid DESC LIMIT ?"
        try:
            with self._lock:
                found = self._db.execute(sql, (*args, rows)).fetchall()
        except sqlite3.OperationalError as exc:  # fts5: syntax error near "(" ...
            raise QueryError(str(exc)) from None
        found.sort(key=lambda row: row[4])  # bm25: lower is better; stable for equal scores
        return [Hit(*row[:4]) for row in found]

    def around(self, session_id: str, seq: int, window: int) -> list[tuple[int, dict[str, Any]]]:
        """(seq, message) of the messages from `seq - window` to `seq + window`."""
        with self._lock:
            found = self._db.execute(
                "SELECT seq, message, withheld FROM messages WHERE session_id = ?"
                " AND seq BETWEEN ? AND ? ORDER BY seq",
                (session_id, seq - window, seq + window)).fetchall()
        return [(n, loaded(n, text, withheld)) for n, text, withheld in found]

    def withheld_texts(self, session_id: str) -> list[str]:
        """The stored contents of the session's withheld results (to find them quoted)."""
        with self._lock:
            rows = self._db.execute("SELECT message FROM messages WHERE session_id = ?"
                                    " AND withheld IS NOT NULL", (session_id,)).fetchall()
        return [str(json.loads(text).get("content") or "") for (text,) in rows]

    def last_seq(self, session_id: str) -> int:
        with self._lock:
            (last,) = self._db.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = ?", (session_id,)
            ).fetchone()
        return int(last)


@dataclass(frozen=True, slots=True)
class Hit:
    session_id: str
    seq: int
    role: str
    snippet: str


def _record(row: tuple[Any, ...]) -> SessionRecord:
    session_id, cwd, title, model, mode, created_at, updated_at, meta = row
    return SessionRecord(session_id, cwd, title, model, mode, created_at, updated_at,
                         json.loads(meta or "{}"))
