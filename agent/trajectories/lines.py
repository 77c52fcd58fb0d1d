"""The lines of a ShareGPT or batch file, read one way for every `talaria trajectories`
command: a line that is not JSON or not a trajectory is named with its number, and the
command does nothing (exit 2). Imports no export, compression or view (they all read here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from talaria.agent.trajectories.model import TrajectoryNotFound

__all__ = ["ROWS_NAMED", "UnreadableRows", "trajectory_lines"]


class UnreadableRows(TrajectoryNotFound):
    """Lines of a trajectory file that cannot be read; `rows` is [(line number, reason)]."""

    def __init__(self, path: Path, rows: list[tuple[int, str]], total: int,
                 outcome: str = "nothing was exported") -> None:
        self.path, self.rows, self.total = path, rows, total
        shown = "; ".join(f"line {n}: {why}" for n, why in rows[:ROWS_NAMED])
        more = f"; and {len(rows) - ROWS_NAMED} more" if len(rows) > ROWS_NAMED else ""
        super().__init__(f"{path}: {len(rows)} of {total} line(s) cannot be read as "
                         f"trajectories ({shown}{more}); {outcome}")


ROWS_NAMED = 10
"""Unreadable lines named one by one in an error; the rest are counted."""


def trajectory_lines(path: Path, outcome: str, *, keep: bool = True) -> list[dict[str, Any]]:
    """Every non-blank line of a ShareGPT or batch file (`{"conversations": [...]}` or a record
    with `messages`), as objects; `keep=False` checks without holding them (a big file).
    Raises UnreadableRows naming each other line (`outcome`: what was not done), and
    TrajectoryNotFound when the file cannot be read or holds no line at all."""
    kept: list[dict[str, Any]] = []
    bad: list[tuple[int, str]] = []
    total = 0
    try:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                total += 1
                why = _not_a_line(line)
                if isinstance(why, str):
                    bad.append((number, why))
                elif keep:
                    kept.append(why)
    except (OSError, UnicodeDecodeError) as exc:
        raise TrajectoryNotFound(f"cannot read trajectories from {path}: {exc}") from exc
    if not total:
        raise TrajectoryNotFound(f"{path} holds no trajectories (ShareGPT lines: "
                                 "{\"conversations\": [...]} per line)")
    if bad:
        raise UnreadableRows(path, bad, total, outcome)
    return kept


def _not_a_line(line: str) -> dict[str, Any] | str:
    """The line's object, or why it is not a trajectory line."""
    try:
        entry = json.loads(line)
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc.msg}, column {exc.colno})"
    if not isinstance(entry, dict):
        return f"a JSON {type(entry).__name__}, not an object with \"conversations\""
    turns = entry.get("conversations", entry.get("messages"))
    if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
        return "no \"conversations\" list of turns"
    return entry
