"""`statistics.json`: what a run did, computed from every line of `trajectories.jsonl`.

    {"tasks": {"total", "completed", "failed", "success_rate"},
     "failures_by_reason": {reason: count},
     "first_failures": {reason: {"task_id", "error"}}  (the first line of each reason),
     "tools": {name: {"calls", "failed", "success_rate", "tasks_using"}},
     "turns": {...}, "duration_s": {...}, "model_s": {...}  (total, mean, p50, p95, max)
     "tokens": {"input", "output", "cache_read", "cache_write", "reasoning", "mean_per_task"},
     "models": {model: tasks},
     "verification": {reward, resolved rate, pass@k, cost, turns, time; by model, toolset
                      and tag: see verdicts.py},
     "sequences": {tool-call n-grams over-represented in solved / unsolved attempts},
     "tool_errors": [repeated tool errors, grouped by normalised message]  (sequences.py),
     "toolset_mix"?: {spec, seed, arms: {label: {weight, share, tools, tasks}}}  (mix.py;
                      written by the runner for a `--toolset-mix` run),
     "run": {every invocation together: invocations, executor, workers (the last one's),
             tasks_run, wall_s, tasks_per_minute, bookkeeping_ms_per_task},
     "runs": [{one invocation that ran tasks: started_at, executor, workers, tasks_run,
               wall_s, bookkeeping_ms, resume, retry_failed}, ...]}

Each line is one attempt of a task (`--attempts`); `tasks` counts lines. "completed" means the
agent ended its turn, not that the task was solved: that is `verification`'s `resolved`.
`tasks`, `tools`, `turns`, ... cover every line of the run's file; `run` and `runs` every
invocation, so a `--resume` adds to them instead of replacing the figures with its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from talaria.agent.trajectories.batch.sequences import Sequences
from talaria.agent.trajectories.batch.verdicts import Row, row_of, verification


class Stats:
    """Accumulates records one at a time (a run's file may be large: never held whole)."""

    def __init__(self) -> None:
        self.status: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()
        self.first_failures: dict[str, dict[str, Any]] = {}
        self.models: Counter[str] = Counter()
        self.tools: dict[str, dict[str, int]] = {}
        self.tokens: Counter[str] = Counter()
        self.turns: list[int] = []
        self.durations: list[float] = []
        self.model_times: list[float] = []
        self.rows: list[Row] = []
        self.sequences = Sequences()

    def add(self, record: dict[str, Any]) -> None:
        status = "completed" if record.get("status") == "completed" else "failed"
        self.status[status] += 1
        if status == "failed":
            reason = str(record.get("reason") or "unknown")
            self.reasons[reason] += 1
            self.first_failures.setdefault(reason, {"task_id": record.get("task_id"),
                                                    "error": record.get("error") or ""})
        self.models[str(record.get("model") or "?")] += 1
        for name, counts in (record.get("tool_stats") or {}).items():
            # Records say {calls, failed}; ShareGPT lines {count, success, failure} for every tool.
            calls = int(counts.get("calls", counts.get("count", 0)) or 0)
            if not calls:
                continue
            entry = self.tools.setdefault(name, {"calls": 0, "failed": 0, "tasks_using": 0})
            entry["calls"] += calls
            entry["failed"] += int(counts.get("failed", counts.get("failure", 0)) or 0)
            entry["tasks_using"] += 1
        for key, value in (record.get("tokens") or {}).items():
            self.tokens[key] += int(value or 0)
        self.turns.append(int(record.get("turns") or 0))
        self.durations.append(float(record.get("duration_s") or 0.0))
        self.model_times.append(float(record.get("model_s") or 0.0))
        self.rows.append(row_of(record))
        self.sequences.add(record)

    def to_dict(self, run: dict[str, Any] | None = None) -> dict[str, Any]:
        total = sum(self.status.values())
        tools = {
            name: {**entry, "success_rate": _rate(entry["calls"] - entry["failed"], entry["calls"])}
            for name, entry in sorted(self.tools.items())
        }
        return {
            "tasks": {"total": total, "completed": self.status["completed"],
                      "failed": self.status["failed"],
                      "success_rate": _rate(self.status["completed"], total)},
            "failures_by_reason": dict(self.reasons.most_common()),
            "first_failures": {r: self.first_failures[r] for r, _ in self.reasons.most_common()},
            "tools": tools,
            "turns": describe(self.turns),
            "duration_s": describe(self.durations),
            "model_s": describe(self.model_times),
            "tokens": {**dict(self.tokens),
                       "mean_per_task": round(sum(self.tokens.values()) / total, 1) if total else 0},
            "models": dict(self.models.most_common()),
            "verification": verification(self.rows),
            **self.sequences.to_dict(),
            "run": run or {},
        }


def compute(
    records: Iterable[dict[str, Any]], run: dict[str, Any] | None = None,
    runs: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Statistics of `records`; with `runs` (every invocation), `run` is their merge."""
    stats = Stats()
    for record in records:
        stats.add(record)
    if runs is None:
        return stats.to_dict(run)
    return {**stats.to_dict(merge_runs(runs)), "runs": runs}


def merge_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One `run` entry for every invocation: counts and times summed, rates recomputed;
    executor and workers are the last invocation's."""
    latest = runs[-1] if runs else {}
    tasks = sum(int(r.get("tasks_run") or 0) for r in runs)
    wall = sum(float(r.get("wall_s") or 0.0) for r in runs)
    book = sum(float(r.get("bookkeeping_ms") or 0.0) for r in runs)
    return {"invocations": len(runs), "executor": latest.get("executor"),
            "workers": latest.get("workers"), "tasks_run": tasks, "wall_s": round(wall, 3),
            "tasks_per_minute": round(tasks / wall * 60, 2) if wall else 0.0,
            "bookkeeping_ms_per_task": round(book / tasks, 3) if tasks else 0.0}


def describe(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"total": 0, "mean": 0, "p50": 0, "p95": 0, "max": 0}
    ordered = sorted(values)
    return {
        "total": round(sum(ordered), 4),
        "mean": round(sum(ordered) / len(ordered), 4),
        "p50": round(ordered[len(ordered) // 2], 4),
        "p95": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 4),
        "max": round(ordered[-1], 4),
    }


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0
