"""`session_search` over 1,000 stored sessions of 200 messages each (target: ≤ 50 ms a query).

The store is filled the way an older Talaria left it (messages, no index), then opened: that
times the one-off indexing of an existing database too. Messages are seeded random prose over
a 5,000-word vocabulary (Zipf-like: a few words are everywhere, most are rare), sessions spread
over 10 projects; queries of each kind run against one project and against all.
"""

from __future__ import annotations

import json
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from talaria.agent.recall import session_search
from talaria.agent.store import SCHEMA, Store

SESSIONS = 1_000
MESSAGES = 200
PROJECTS = 10
VOCABULARY = 5_000
TARGET_MS = 50
RUNS = 15


def _words(rng: random.Random) -> list[str]:
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vi", "so", "de", "pa", "gu", "ze"]
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def _fill(path: Path, rng: random.Random, vocabulary: list[str]) -> None:
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    now = time.time()
    for s in range(SESSIONS):
        sid = f"s{s:04d}"
        db.execute("INSERT INTO sessions (id, cwd, title, model, mode, created_at, updated_at)"
                   " VALUES (?, ?, ?, 'm', 'default', ?, ?)",
                   (sid, f"/projects/p{s % PROJECTS}", f"session {s}", now - s, now - s))
        rows = []
        for n in range(1, MESSAGES + 1):
            text = " ".join(rng.choices(vocabulary, weights, k=rng.randint(20, 80)))
            role = "user" if n % 2 else "assistant"
            rows.append((sid, n, now - s, json.dumps({"role": role, "content": text})))
        db.executemany("INSERT INTO messages (session_id, seq, created_at, message) VALUES (?, ?, ?, ?)", rows)
    db.commit()
    db.close()


def recall() -> Iterator[dict[str, Any]]:
    rng = random.Random(20261201)
    vocabulary = _words(rng)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sessions.db"
        _fill(path, rng, vocabulary)
        started = time.perf_counter()
        store = Store(path)
        index_s = time.perf_counter() - started
        yield {"metric": "index_existing_database_s", "value": round(index_s, 2),
               "messages": SESSIONS * MESSAGES, "db_mb": round(path.stat().st_size / 2**20, 1),
               "note": "once, when an older sessions.db is first opened"}
        queries = {
            "common_word": vocabulary[0],
            "rare_word": vocabulary[-7],
            "two_words": f"{vocabulary[3]} {vocabulary[900]}",
            "phrase": f'"{vocabulary[1]} {vocabulary[2]}"',
            "prefix": vocabulary[40][:3] + "*",
            "or_three": f"{vocabulary[500]} OR {vocabulary[1500]} OR {vocabulary[2500]}",
        }
        for scope in ("project", "all"):
            for kind, query in queries.items():
                samples, found = [], 0
                for _ in range(RUNS):
                    t = time.perf_counter()
                    answer = session_search(store, {"query": query, "limit": 3, "scope": scope},
                                            cwd=Path("/projects/p3"), session_id="current")
                    samples.append(time.perf_counter() - t)
                    found = answer["count"]
                samples.sort()
                yield {"metric": "session_search_ms", "query": kind, "scope": scope,
                       "median": round(statistics.median(samples) * 1e3, 2),
                       "p95": round(samples[int(len(samples) * 0.95) - 1] * 1e3, 2),
                       "sessions_returned": found, "target": TARGET_MS,
                       "stored": f"{SESSIONS} sessions x {MESSAGES} messages"}
        samples = []
        for _ in range(RUNS):
            t = time.perf_counter()
            session_search(store, {"session_id": "s0003", "around_message_id": 100, "window": 10},
                           cwd=Path("/projects/p3"), session_id="current")
            samples.append(time.perf_counter() - t)
        yield {"metric": "session_search_scroll_ms", "median": round(statistics.median(samples) * 1e3, 2),
               "target": TARGET_MS}
        appends = []
        store.create_session("live", "/projects/p3", model="m", mode="default")
        for _ in range(200):
            text = " ".join(rng.choices(vocabulary, k=60))
            t = time.perf_counter()
            store.append("live", {"role": "assistant", "content": text})
            appends.append(time.perf_counter() - t)
        yield {"metric": "append_with_index_ms", "median": round(statistics.median(appends) * 1e3, 3),
               "note": "one message committed with its index row, on a 200K-message database"}
        store.close()


BENCHMARKS = {"recall": recall}
