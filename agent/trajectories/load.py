"""Trajectories: a session's transcript plus its metadata, cost and outcome, after the fact.

    write_transcript(store, id, dir)   the transcript as JSON lines, one internal message per
                                       line (also a `replay:` recording, see providers/replay)
    load_trajectory(store, id)         a `Trajectory` from the session store
    load_trajectory_file(path)         a `Trajectory` from a transcript JSONL file (or a line of
                                       a ShareGPT export)
    load_trajectory_rows(path)         every `Trajectory` of a file: one for a transcript, one
                                       per line of a ShareGPT file (a batch's trajectories.jsonl);
                                       raises UnreadableRows naming every line it cannot read
    trajectory_lines(path, outcome)    the lines of a ShareGPT / batch file as objects, read the
                                       same way (`lines`: `compress` and `view` use it)

Every `talaria trajectories` command reads its input through these: a line that is not JSON
or not a trajectory is named with its number, and the command does nothing (exit 2).

The model (`Trajectory`, `build`, `completed` / `partial`) is in `model`.
Exports (ShareGPT, OpenAI, ATIF) live in `talaria.agent.trajectories.export`; the HTML view in
`talaria.agent.trajectories.view`.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from talaria.agent.store import Store
from talaria.agent.trajectories.lines import ROWS_NAMED, UnreadableRows, trajectory_lines

__all__ = ["ROWS_NAMED", "UnreadableRows", "trajectory_lines"]  # read here too (tests, callers)
from talaria.agent.trajectories.model import (
    USAGE_KEYS,
    Trajectory,
    TrajectoryNotFound,
    build,
    parse_time,
)


def write_transcript(store: Store, session_id: str, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{session_id}.jsonl"
    tmp = path.with_suffix(".jsonl.tmp")
    with tmp.open("w", encoding="utf-8") as out:
        for message in store.messages(session_id):
            out.write(json.dumps(message, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def load_trajectory(store: Store, session_id: str) -> Trajectory:
    """The session's whole transcript (compacted parts included) with its metadata."""
    record = store.get_session(session_id)
    if record is None:
        raise TrajectoryNotFound(f"no session {session_id!r} in {store.path}")
    rows = store.messages(session_id)
    times = _message_times(store.path, session_id)
    if len(times) != len(rows):  # appended between the two reads: times are best effort
        times = [None] * len(rows)
    return build(
        rows, times, session_id=record.id, model=record.model, cwd=record.cwd,
        title=record.title, mode=record.mode, created_at=record.created_at,
        updated_at=record.updated_at,
    )


def load_trajectory_file(path: Path | str, *, index: int = 0) -> Trajectory:
    """A transcript JSONL (`write_transcript`), or line `index` of a ShareGPT export."""
    trajectories = load_trajectory_rows(path)
    if index >= len(trajectories):
        raise TrajectoryNotFound(f"{path} has {len(trajectories)} trajectories, not {index + 1}")
    return trajectories[index]


def load_trajectory_rows(path: Path | str) -> list[Trajectory]:
    """Every trajectory of a file, in order: a transcript JSONL is one, a ShareGPT file (an
    export, a batch's trajectories.jsonl) one per line. Raises UnreadableRows naming each line
    that cannot be read, rather than dropping it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TrajectoryNotFound(f"cannot read a trajectory from {path}: {exc}") from exc
    rows: list[tuple[int, Any]] = []
    bad: list[tuple[int, str]] = []
    numbered = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    ordinal = {n: i for i, (n, _) in enumerate(numbered)}  # position among non-blank lines
    for number, line in numbered:
        try:
            rows.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            bad.append((number, f"not JSON ({exc.msg}, column {exc.colno})"))
    total = len(numbered)
    if any(isinstance(row, dict) and "conversations" in row for _, row in rows):
        trajectories = []
        for number, row in rows:
            try:
                trajectories.append(_sharegpt_row(path, number, row, ordinal[number]))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                bad.append((number, f"not a ShareGPT trajectory ({type(exc).__name__}: {exc})"))
        if bad:
            raise UnreadableRows(path, sorted(bad), total)
        return trajectories
    bad += [(n, "not a message (a JSON object with a \"role\")") for n, row in rows
            if not (isinstance(row, dict) and "role" in row)]
    if bad or not rows:
        if not rows or len(bad) == total:
            first = f" (line {min(bad)[0]}: {min(bad)[1]})" if bad else ""
            raise TrajectoryNotFound(f"{path} is neither a transcript (JSON lines of messages) "
                                     f"nor ShareGPT lines ({{\"conversations\": [...]}} per line){first}")
        raise UnreadableRows(path, sorted(bad), total)
    try:
        return [build([row for _, row in rows], None, session_id=path.stem,
                      extra={"origin": f"{path}"})]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise TrajectoryNotFound(f"{path}: not a readable transcript "
                                 f"({type(exc).__name__}: {exc})") from exc


BATCH_KEYS = ("task_id", "attempt", "status", "reason", "error", "reward", "resolved", "skills")
"""Fields of a batch line (or an export of one) a trajectory keeps in its `extra`."""


def _sharegpt_row(path: Path, number: int, line: dict[str, Any], position: int) -> Trajectory:
    """One ShareGPT line (Hermes', `export --format sharegpt`, or a Talaria batch line)."""
    from talaria.agent.trajectories.export.sharegpt import parse_sharegpt

    meta = line.get("metadata") or {}
    if not isinstance(meta, dict):
        raise TypeError("metadata is not an object")
    usage = meta.get("usage")
    index = line.get("prompt_index")
    extra = {"source": "sharegpt", "origin": f"{path}:{number}",
             "prompt_index": index if isinstance(index, int) else position}
    if isinstance(usage, dict):
        extra["usage"] = {key: int(usage.get(key) or 0) for key in USAGE_KEYS}
    for key in BATCH_KEYS:  # a Talaria batch line's own fields
        if line.get(key) is not None:
            extra[key] = line[key]
    if "cost_usd" in line:  # recorded, even as None (no price): not to be guessed again
        extra["cost_usd"] = line["cost_usd"]
    session_id = meta.get("session_id") or line.get("task_id") or f"{path.stem}-{position}"
    return build(
        parse_sharegpt(line), None, session_id=str(session_id),
        model=meta.get("model") or line.get("model"), created_at=parse_time(meta.get("timestamp")),
        extra=extra,
    )

def _message_times(path: Path, session_id: str) -> list[float | None]:
    """Record times of the session's messages, in transcript order. The store's API returns
    messages without them; a second connection reads them (WAL: readers never block)."""
    db = sqlite3.connect(path)
    try:
        rows = db.execute(
            "SELECT created_at FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()
    finally:
        db.close()
    return [row[0] for row in rows]
