"""Bring a session database from an older `PRAGMA user_version` to `store.SCHEMA_VERSION`.

    1  `messages_fts`: every stored message indexed once (`searchable_text`)
    2  `messages.withheld`: the stored tool results that reached a secret path, judged by the
       default path policy as they would be now when stored (`withheld.judge_stored`), are
       marked and left out of the index

Runs inside the caller's open transaction (nothing here commits).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable
from typing import Any

from talaria.agent.withheld import judge_stored

log = logging.getLogger(__name__)


def migrate(db: sqlite3.Connection, version: int, *, fts_schema: str,
            searchable_text: Callable[[dict[str, Any]], str]) -> None:
    """The store's own schema and index text are passed in (the store imports this module)."""
    db.execute(fts_schema)  # executescript would commit the open transaction
    if version < 2:
        _mark_withheld(db)
    if version < 1:
        _index(db, searchable_text)


def _mark_withheld(db: sqlite3.Connection) -> None:
    columns = {row[1] for row in db.execute("PRAGMA table_info(messages)")}
    if "withheld" not in columns:
        db.execute("ALTER TABLE messages ADD COLUMN withheld TEXT")
    rows = db.execute("SELECT m.rowid, s.cwd, m.message FROM messages m"
                      " JOIN sessions s ON s.id = m.session_id ORDER BY m.session_id, m.seq")
    marks = judge_stored((rowid, cwd, json.loads(text)) for rowid, cwd, text in rows)
    for rowid, path in marks:
        db.execute("UPDATE messages SET withheld = ? WHERE rowid = ?", (path, rowid))
        db.execute("DELETE FROM messages_fts WHERE rowid = ?", (rowid,))
    if marks:
        log.info("withheld %d stored results of sensitive reads from session_search", len(marks))


def _index(db: sqlite3.Connection, searchable_text: Callable[[dict[str, Any]], str]) -> None:
    rows = db.execute("SELECT rowid, session_id, seq, message FROM messages WHERE withheld IS NULL")
    indexed = 0
    for rowid, session_id, seq, text in rows.fetchall():
        message = json.loads(text)
        if found := searchable_text(message):
            db.execute("INSERT INTO messages_fts (rowid, text, role, session_id, seq)"
                       " VALUES (?, ?, ?, ?, ?)", (rowid, found, message.get("role"), session_id, seq))
            indexed += 1
    if indexed:
        log.info("indexed %d stored messages for session_search", indexed)
