"""What the verifier said about a run: `statistics.json`'s `verification`.

    {"tasks", "attempts", "unchecked_attempts", "resolved", "resolved_rate",
     "reward": {"mean", "std", "min", "max"}       over every checked attempt,
     "pass_at": {"1": p, ..., "K": p}               mean over tasks of pass@k (Chen et al.)
     "by_attempt": {"1": {"reward_mean", "resolved_rate", "attempts"}, ...},
     "reward_across_attempts": {"mean", "std"}      of the per-attempt means (run-to-run spread)
     "verifier_errors", "cost_usd": {"total", "mean_per_attempt", "per_solved_task",
                                     "unpriced_attempts"},
     "turns": {"mean", "per_solved_task"}, "duration_s": {"mean", "total"},
     "verifier_s": {"mean", "total"},
     "by_model" / "by_toolset" / "by_tag": {name: the same summary, without the breakdowns},
     "per_task": {task id: {"attempts", "resolved", "pass_at": {...}, "reward_mean", "reward_std"}}}

pass@k for a task with n attempts of which c resolved is 1 - C(n-c, k) / C(n, k), the unbiased
estimator of Chen et al. 2021 (k <= n); a run's pass@k is its mean over the tasks with at
least k attempts. Standard deviations are sample ones (n - 1); None below two values.
`cost_usd.per_solved_task` is every attempt's cost (checked or not, priced) divided by the
number of resolved attempts: what one solve costs (`turns.per_solved_task` likewise: every
attempt's model calls per resolved attempt). An unpriced attempt (a model without a price)
adds nothing and is counted in `unpriced_attempts`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


def pass_at_k(n: int, c: int, k: int) -> float:
    """The probability that at least one of k attempts drawn from n (c resolved) resolves."""
    if not 0 < k <= n or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 < k <= n and 0 <= c <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def mean_std(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "std": None}
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else None
    return {"mean": round(mean, 6), "std": round(std, 6) if std is not None else None}


@dataclass(frozen=True, slots=True)
class Row:
    task: str
    attempt: int
    reward: float | None
    resolved: bool | None
    cost: float | None
    duration: float
    verifier_s: float | None
    error: bool
    model: str
    toolsets: str
    tags: tuple[str, ...]
    turns: int = 0


def row_of(record: dict[str, Any]) -> Row:
    verifier = record.get("verifier") or {}
    return Row(str(record.get("task_id")), int(record.get("attempt") or 1),
               record.get("reward"), record.get("resolved"), record.get("cost_usd"),
               float(record.get("duration_s") or 0.0), verifier.get("duration_s"),
               bool(verifier.get("error")), str(record.get("model") or "?"),
               str(record.get("toolsets") or "core"), tuple(record.get("tags") or ()),
               int(record.get("turns") or 0))


def summary(rows: list[Row], *, detail: bool = False) -> dict[str, Any]:
    checked = [r for r in rows if r.resolved is not None]
    per_task: dict[str, list[Row]] = defaultdict(list)
    for row in checked:
        per_task[row.task].append(row)
    most = max((len(v) for v in per_task.values()), default=0)
    pass_at = {}
    for k in range(1, most + 1):
        values = [pass_at_k(len(v), sum(bool(r.resolved) for r in v), k)
                  for v in per_task.values() if len(v) >= k]
        pass_at[str(k)] = round(sum(values) / len(values), 6)
    rewards = [float(r.reward or 0.0) for r in checked]
    resolved = sum(bool(r.resolved) for r in checked)
    costs = [r.cost for r in rows if r.cost is not None]
    verifier_times = [r.verifier_s for r in checked if r.verifier_s is not None]
    out: dict[str, Any] = {
        "tasks": len(per_task), "attempts": len(checked),
        "unchecked_attempts": len(rows) - len(checked), "resolved": resolved,
        "resolved_rate": round(resolved / len(checked), 6) if checked else None,
        "reward": {**mean_std(rewards), "min": min(rewards, default=None),
                   "max": max(rewards, default=None)},
        "pass_at": pass_at,
        "verifier_errors": sum(r.error for r in checked),
        "cost_usd": {"total": round(sum(costs), 6),
                     "mean_per_attempt": round(sum(costs) / len(costs), 6) if costs else None,
                     "per_solved_task": round(sum(costs) / resolved, 6) if resolved and costs else None,
                     "unpriced_attempts": len(rows) - len(costs)},
        "turns": {"mean": round(sum(r.turns for r in rows) / len(rows), 4) if rows else None,
                  "per_solved_task": round(sum(r.turns for r in rows) / resolved, 4) if resolved else None},
        "duration_s": {"mean": round(sum(r.duration for r in rows) / len(rows), 4) if rows else None,
                       "total": round(sum(r.duration for r in rows), 4)},
        "verifier_s": {"mean": round(sum(verifier_times) / len(verifier_times), 4)
                       if verifier_times else None, "total": round(sum(verifier_times), 4)},
    }
    if detail:
        out |= _detail(checked, per_task)
    return out


def _detail(checked: list[Row], per_task: dict[str, list[Row]]) -> dict[str, Any]:
    rounds: dict[int, list[Row]] = defaultdict(list)
    for row in checked:
        rounds[row.attempt].append(row)
    by_attempt = {str(a): {"attempts": len(rs),
                           "reward_mean": round(sum(float(r.reward or 0) for r in rs) / len(rs), 6),
                           "resolved_rate": round(sum(bool(r.resolved) for r in rs) / len(rs), 6)}
                  for a, rs in sorted(rounds.items())}
    tasks = {}
    for task, rows in per_task.items():
        n, c = len(rows), sum(bool(r.resolved) for r in rows)
        spread = mean_std([float(r.reward or 0.0) for r in rows])
        tasks[task] = {"attempts": n, "resolved": c,
                       "pass_at": {str(k): round(pass_at_k(n, c, k), 6) for k in range(1, n + 1)},
                       "reward_mean": spread["mean"], "reward_std": spread["std"]}
    return {"by_attempt": by_attempt,
            "reward_across_attempts": mean_std([v["reward_mean"] for v in by_attempt.values()]),
            "per_task": tasks}


def verification(rows: Iterable[Row]) -> dict[str, Any]:
    """The `verification` section of statistics.json for the rows of every record of a run."""
    rows = list(rows)
    out = summary(rows, detail=True)
    groups: dict[str, dict[str, list[Row]]] = {"by_model": defaultdict(list),
                                               "by_toolset": defaultdict(list),
                                               "by_tag": defaultdict(list)}
    for row in rows:
        groups["by_model"][row.model].append(row)
        groups["by_toolset"][row.toolsets].append(row)
        for tag in row.tags:
            groups["by_tag"][tag].append(row)
    for name, grouped in groups.items():
        out[name] = {key: summary(rs) for key, rs in sorted(grouped.items())}
    return out
