"""Reading: whole transcripts and live contexts, and the session list, on read connections
of their own, one per thread.

A long read (a session of megabytes loaded or replayed, a page at a time in a worker thread)
held the store's one connection, and with it every other call the event loop makes; a 1 MB
message being written did too (`session/list` waited 30-80 ms, issue 29). In WAL mode a read
connection sees a consistent snapshot while the writer writes, and one per thread means no
read waits for another: each sees every message committed before it started.

Rows are parsed by `store_rows` (other writers' shapes, unreadable rows); `LOAD_PAGE` rows per
query keep the heap from holding a whole transcript's text at once.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from talaria.agent.store_rows import live, read_row, read_snapshot
from talaria.agent.transcript import context_rows
from talaria.tools.redact import WITHHELD

LOAD_PAGE = 100
"""Rows per query when a transcript is read whole: the texts of a page, freed once it is
parsed, stay a hole among the loaded context's (500 rows: ~0.3 MB more at 20,000)."""


class _Reader:
    """A thread's read connection; it closes with the thread (the thread-local drops it)."""

    __slots__ = ("db", "__weakref__")

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA busy_timeout=5000")


class TranscriptReads:
    """The store's reads (thread-safe: a connection per thread, opened at its first read)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._local = threading.local()
        self._open: weakref.WeakSet[_Reader] = weakref.WeakSet()
        """The connections of threads still alive (to hand their caches back, to close)."""
        self._registry = threading.Lock()

    def connection(self) -> sqlite3.Connection:
        """This thread's read connection."""
        reader: _Reader | None = getattr(self._local, "reader", None)
        if reader is None:
            reader = self._local.reader = _Reader(self._path)
            with self._registry:
                self._open.add(reader)
        return reader.db

    def messages_after(self, session_id: str, seq: int, limit: int = -1, *,
                       marks: bool = True) -> list[tuple[int, dict[str, Any]]]:
        """(seq, message) after `seq`, at most `limit` (-1: all); `marks`: with `withheld`'s
        mark, else as a live context (`store_rows.read_row(live=True)`)."""
        rows = self.connection().execute(
            "SELECT seq, message, withheld FROM messages WHERE session_id = ? AND seq > ?"
            " ORDER BY seq LIMIT ?", (session_id, seq, limit)).fetchall()
        return [(n, loaded(n, text, withheld, live=not marks)) for n, text, withheld in rows]

    def pages(self, session_id: str, seq: int, *, marks: bool) -> Iterator[tuple[int, dict[str, Any]]]:
        """Rows after `seq`, a page at a time."""
        while page := self.messages_after(session_id, seq, LOAD_PAGE, marks=marks):
            seq = page[-1][0]
            yield from page

    def context(self, session_id: str) -> list[dict[str, Any]]:
        """The live context: the last snapshot plus the messages appended after it."""
        snap = self.connection().execute(
            "SELECT upto_seq, messages FROM contexts WHERE session_id = ?", (session_id,)
        ).fetchone()
        upto, base = (snap[0], read_snapshot(snap[1])) if snap else (0, [])
        later = [m for _, m in self.pages(session_id, upto, marks=False)]
        return live(base + context_rows(later))

    def release_memory(self) -> None:
        """Hand back the pages SQLite cached for reads (a whole transcript: up to 2 MB each)."""
        with self._registry:
            for reader in list(self._open):
                reader.db.execute("PRAGMA shrink_memory")

    def close(self) -> None:
        with self._registry:
            for reader in list(self._open):
                reader.db.close()
            self._open.clear()
        self._local = threading.local()


def loaded(seq: int, text: str, withheld: str | None, *, live: bool = False) -> dict[str, Any]:
    """A stored message, with its `withheld` mark (also one the column got later) unless
    `live`; an `unreadable` event row in its place when it cannot be read (`store_rows`)."""
    message = read_row(seq, text, live=live)
    if withheld and not live and message.get("role") != "event" and not message.get(WITHHELD):
        message[WITHHELD] = withheld
    return message
