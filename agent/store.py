"""The session store: SQLite in WAL mode at `$TALARIA_HOME/sessions.db`.

Every message is committed as it is appended, so a crash (even `kill -9`) loses at most the
message in flight, and WAL keeps the database consistent. The `messages` table is the whole
transcript and is never rewritten (it is the trajectory: history, export, training data).
When compaction or /clear changes the live context, the new context is saved as a snapshot in
`contexts`; the live context is that snapshot plus every message appended after it. Rows with
`role = "event"` (compaction records) belong to the transcript only.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    """Thread-safe (one connection, one lock); calls are short and synchronous."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
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
        allowed = {"title", "model", "mode", "meta"}
        if not fields or set(fields) - allowed:
            raise ValueError(f"can only update {sorted(allowed)}")
        if "meta" in fields:
            fields["meta"] = json.dumps(fields["meta"])
        assignments = ", ".join(f"{name} = ?" for name in fields)
        with self._lock:
            self._db.execute(
                f"UPDATE sessions SET {assignments}, updated_at = ? WHERE id = ?",
                (*fields.values(), time.time(), session_id),
            )

    def get_session(self, session_id: str) -> SessionRecord | None:
        with self._lock:
            row = self._db.execute(
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
        with self._lock:
            rows = self._db.execute(query, (*args, limit)).fetchall()
        return [_record(row) for row in rows]

    def append(self, session_id: str, message: dict[str, Any]) -> int:
        """Commit one message; returns its sequence number."""
        text = json.dumps(message, ensure_ascii=False)
        now = time.time()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                (seq,) = self._db.execute(
                    "SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE session_id = ?",
                    (session_id,),
                ).fetchone()
                self._db.execute(
                    "INSERT INTO messages (session_id, seq, created_at, message) VALUES (?, ?, ?, ?)",
                    (session_id, seq, now, text),
                )
                self._db.execute(
                    "UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id)
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return seq

    def messages(self, session_id: str, *, include_archived: bool = True) -> list[dict[str, Any]]:
        """The whole transcript, or with `include_archived=False` the live context."""
        if not include_archived:
            return self.context(session_id)
        with self._lock:
            rows = self._db.execute(
                "SELECT message FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)
            ).fetchall()
        return [json.loads(text) for (text,) in rows]

    def context(self, session_id: str) -> list[dict[str, Any]]:
        """The live context: the last snapshot plus the messages appended after it."""
        with self._lock:
            snap = self._db.execute(
                "SELECT upto_seq, messages FROM contexts WHERE session_id = ?", (session_id,)
            ).fetchone()
            upto, base = (snap[0], json.loads(snap[1])) if snap else (0, [])
            rows = self._db.execute(
                "SELECT message FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq",
                (session_id, upto),
            ).fetchall()
        later = [json.loads(text) for (text,) in rows]
        return base + [m for m in later if m.get("role") != "event"]

    def save_context(self, session_id: str, messages: list[dict[str, Any]]) -> None:
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
                    "INSERT INTO messages (session_id, seq, created_at, message)"
                    " SELECT ?, seq, created_at, message FROM messages WHERE session_id = ?",
                    (new_id, source_id))
                self._db.execute(
                    "INSERT INTO contexts (session_id, upto_seq, created_at, messages)"
                    " SELECT ?, upto_seq, created_at, messages FROM contexts WHERE session_id = ?",
                    (new_id, source_id))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise


def _record(row: tuple[Any, ...]) -> SessionRecord:
    session_id, cwd, title, model, mode, created_at, updated_at, meta = row
    return SessionRecord(session_id, cwd, title, model, mode, created_at, updated_at,
                         json.loads(meta or "{}"))
