"""A batch run as `compare` needs it: each task's checked attempts, read one line at a time.

    run = read_run(Path("data/with-skills"), label="with-skills")
    run.tasks["t1"]            # [Attempt(resolved, reward, cost, turns, tokens, duration, tools)]

RUN is a batch run directory (its `trajectories.jsonl`; `attempts.jsonl`, the history
`--retry-failed` replaced, is not read) or such a file itself. Only what a comparison needs is
kept of each line (never its conversation), so a run of thousands of tasks costs little
memory. A task counts when at least one of its attempts was checked (`resolved` true or
false); tasks without a check are counted in `unchecked` and left out. A line that is not
JSON, not an object, or has no `task_id` is an error naming it (CompareError), as every
`trajectories` command names the lines it cannot read.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from talaria.agent.trajectories.lines import ROWS_NAMED

TRAJECTORIES = "trajectories.jsonl"


class CompareError(Exception):
    """Runs that cannot be compared; the message is one line naming the run and the fix."""


@dataclass(frozen=True, slots=True)
class Attempt:
    resolved: bool
    reward: float
    cost: float | None
    """Dollars (None: a model without a price)."""
    turns: int
    tokens: int
    """Input + output tokens."""
    duration: float
    """Wall seconds of the attempt (agent and check)."""
    tools: tuple[tuple[str, int, int], ...]
    """(tool, calls, failed) for each tool the attempt called."""


@dataclass(slots=True)
class RunOutcomes:
    label: str
    path: Path
    tasks: dict[str, list[Attempt]] = field(default_factory=dict)
    """Task id -> its checked attempts, in attempt order."""
    unchecked: set[str] = field(default_factory=set)
    """Tasks with lines but no checked attempt."""
    agents: Counter[str] = field(default_factory=Counter)
    models: Counter[str] = field(default_factory=Counter)
    toolsets: Counter[str] = field(default_factory=Counter)
    lines: int = 0

    def describe(self) -> dict[str, Any]:
        return {"label": self.label, "path": str(self.path), "lines": self.lines,
                "checked_tasks": len(self.tasks), "unchecked_tasks": len(self.unchecked),
                "agents": dict(self.agents.most_common()), "models": dict(self.models.most_common()),
                "toolsets": dict(self.toolsets.most_common())}


def trajectories_file(source: Path) -> Path:
    """The trajectories.jsonl of a run directory (or the file given); CompareError if none."""
    if source.is_dir():
        if (source / TRAJECTORIES).is_file():
            return source / TRAJECTORIES
        raise CompareError(f"{source} holds no {TRAJECTORIES}: give a `talaria batch` run "
                           "directory (data/RUN_NAME)")
    if source.is_file():
        return source
    raise CompareError(f"no run at {source}: give a `talaria batch` run directory (data/RUN_NAME)")


def read_run(source: Path, label: str) -> RunOutcomes:
    path = trajectories_file(source)
    run = RunOutcomes(label, source)
    attempts: dict[tuple[str, int], Attempt] = {}
    bad: list[tuple[int, str]] = []
    try:
        with path.open(encoding="utf-8") as lines:
            for number, text in enumerate(lines, 1):
                if not text.strip():
                    continue
                run.lines += 1
                why = _take(text, run, attempts)
                if why:
                    bad.append((number, why))
    except (OSError, UnicodeDecodeError) as exc:
        raise CompareError(f"cannot read {path}: {exc}") from exc
    if bad:
        shown = "; ".join(f"line {n}: {why}" for n, why in bad[:ROWS_NAMED])
        more = f"; and {len(bad) - ROWS_NAMED} more" if len(bad) > ROWS_NAMED else ""
        raise CompareError(f"{path}: {len(bad)} of {run.lines} line(s) cannot be read as batch "
                           f"lines ({shown}{more}); nothing was written")
    if not run.lines:
        raise CompareError(f"{path} holds no lines: the run has not finished a task yet")
    for (task, _), attempt in sorted(attempts.items()):
        run.tasks.setdefault(task, []).append(attempt)
    run.unchecked -= run.tasks.keys()
    return run


def _take(text: str, run: RunOutcomes, attempts: dict[tuple[str, int], Attempt]) -> str | None:
    """Keep what one line says; why it cannot be read, or None."""
    try:
        line = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc.msg}, column {exc.colno})"
    if not isinstance(line, dict):
        return f"a JSON {type(line).__name__}, not a batch line"
    if line.get("task_id") in (None, ""):
        return "no task_id (compare reads `talaria batch` lines)"
    task = str(line["task_id"])
    run.agents[str(line.get("agent") or "talaria")] += 1
    run.models[str(line.get("model") or (line.get("metadata") or {}).get("model") or "?")] += 1
    run.toolsets[str(line.get("toolsets") or "core")] += 1
    resolved = line.get("resolved")
    if not isinstance(resolved, bool):
        run.unchecked.add(task)
        return None
    tokens = line.get("tokens") or {}
    reward = line.get("reward")
    cost = line.get("cost_usd")
    attempts[(task, _int(line.get("attempt"), 1))] = Attempt(
        resolved=resolved,
        reward=float(reward) if isinstance(reward, int | float) else float(resolved),
        cost=float(cost) if isinstance(cost, int | float) else None,
        turns=_int(line.get("turns", line.get("api_calls")), 0),
        tokens=_int(tokens.get("input"), 0) + _int(tokens.get("output"), 0),
        duration=float(line.get("duration_s") or 0.0),
        tools=_tools(line.get("tool_stats") or {}))
    return None


def _int(value: Any, default: int) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _tools(stats: dict[str, Any]) -> tuple[tuple[str, int, int], ...]:
    """Per-tool (calls, failed) from either shape: records' {calls, failed}, ShareGPT lines'
    {count, success, failure} (which list every tool, used or not)."""
    out = []
    for name, counts in sorted(stats.items()):
        if not isinstance(counts, dict):
            continue
        calls = _int(counts.get("calls", counts.get("count")), 0)
        if calls:
            out.append((str(name), calls, _int(counts.get("failed", counts.get("failure")), 0)))
    return tuple(out)
