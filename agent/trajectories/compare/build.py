"""The comparison of runs over the tasks they share: what `compare.json` holds.

    data = compare_runs([run_a, run_b, ...], resamples=2000, seed=0, level=0.95)

The first run is the baseline; every other run is compared with it (`comparisons`, one entry
per other run), all over the same tasks: those checked in every run. Layout:

    {"runs": [RunOutcomes.describe() + {"left_out", "left_out_tasks"}],
     "shared_tasks": n, "pairing": PAIRING, "bootstrap": {"resamples", "seed", "level", ...},
     "per_run": {label: {"tasks", "attempts", "resolved_attempts", "pass_at_1", "solved",
                         "reward", "cost_usd", "turns", "tokens", "duration_s"
                         (each {"total", "per_solve"}), "when_solved": {...}, "tools": {...}}},
     "comparisons": [{"a", "b", "outcomes": {"both", "a_only", "b_only", "neither": [ids]},
                      "counts": {...}, "difference": {metric: {"a", "b", "diff", "ci", ...}},
                      "mcnemar": {"b", "c", "method", "statistic", "p_value"}}],
     "per_task": {task: {label: pass@1}}}

`per_solve` is every attempt's total (cost, model calls, tokens, seconds) over the tasks
compared divided by the number of resolved attempts: what one solve costs, failures included.
`when_solved` is the mean over the resolved attempts of the tasks every run solved: the
like-for-like cost of a solve. Tool usage (`tools`) is per tool: calls, failed calls, the
attempts that used it and calls per attempt.
"""

from __future__ import annotations

from typing import Any

from talaria.agent.trajectories.compare.outcomes import Attempt, CompareError, RunOutcomes
from talaria.agent.trajectories.compare.paired import bootstrap_diff, mcnemar

PAIRING = (
    "Tasks are paired by task id; only tasks checked in every run are compared. A task's "
    "outcome in a run is taken over its checked attempts: pass_at_1 is the share of them "
    "resolved (1 or 0 with one attempt), reward their mean reward, solved 1 when any attempt "
    "resolved (pass@k for k attempts). The paired table (both, a_only, b_only, neither) and "
    "McNemar's test use solved; each difference is mean(b) - mean(a) over the tasks, with a "
    "paired bootstrap interval that resamples tasks.")
METRICS = ("pass_at_1", "solved", "reward")
LEFT_OUT_NAMED = 20
"""Left-out task ids listed per run (all are counted)."""
SPENT = (("cost_usd", "cost"), ("turns", "turns"), ("tokens", "tokens"), ("duration_s", "duration"))


def task_values(attempts: list[Attempt]) -> dict[str, float]:
    """A task's outcome in one run (see PAIRING)."""
    n = len(attempts)
    return {"pass_at_1": sum(a.resolved for a in attempts) / n,
            "solved": float(any(a.resolved for a in attempts)),
            "reward": sum(a.reward for a in attempts) / n}


def compare_runs(runs: list[RunOutcomes], *, resamples: int, seed: int, level: float) -> dict[str, Any]:
    """The comparison; CompareError when the runs share no checked task."""
    shared = sorted(set.intersection(*(set(r.tasks) for r in runs)))
    if not shared:
        sizes = ", ".join(f"{r.label}: {len(r.tasks)} checked task(s)" for r in runs)
        raise CompareError(f"the runs share no checked task ({sizes}): compare runs of the same "
                           "tasks file, or dataset, with checks")
    values = {r.label: {t: task_values(r.tasks[t]) for t in shared} for r in runs}
    everywhere = [t for t in shared if all(values[r.label][t]["solved"] for r in runs)]
    described = []
    for run in runs:
        out = sorted(set(run.tasks) - set(shared))
        described.append({**run.describe(), "left_out": len(out),
                          "left_out_tasks": out[:LEFT_OUT_NAMED]})
    return {
        "runs": described, "shared_tasks": len(shared), "pairing": PAIRING,
        "bootstrap": {"resamples": resamples, "seed": seed, "level": level,
                      "method": "paired percentile bootstrap over tasks"},
        "per_run": {r.label: per_run(r, shared, everywhere) for r in runs},
        "comparisons": [pair(runs[0].label, other.label, values, shared, resamples=resamples,
                             seed=seed, level=level) for other in runs[1:]],
        "per_task": {t: {r.label: round(values[r.label][t]["pass_at_1"], 6) for r in runs}
                     for t in shared},
    }


def pair(a: str, b: str, values: dict[str, dict[str, dict[str, float]]], shared: list[str], *,
         resamples: int, seed: int, level: float) -> dict[str, Any]:
    outcomes: dict[str, list[str]] = {"both": [], "a_only": [], "b_only": [], "neither": []}
    for task in shared:
        got = (values[a][task]["solved"] > 0, values[b][task]["solved"] > 0)
        key = {(True, True): "both", (True, False): "a_only", (False, True): "b_only",
               (False, False): "neither"}[got]
        outcomes[key].append(task)
    difference = {}
    intervals: dict[tuple[float, ...], Any] = {}
    for metric in METRICS:
        xs = [values[a][t][metric] for t in shared]
        ys = [values[b][t][metric] for t in shared]
        # With one binary-reward attempt per task the three metrics are the same numbers:
        # one bootstrap serves them all (the same seed would give the same interval).
        diffs = tuple(y - x for x, y in zip(xs, ys, strict=True))
        if diffs not in intervals:
            intervals[diffs] = bootstrap_diff(xs, ys, resamples=resamples, seed=seed, level=level)
        interval = intervals[diffs]
        difference[metric] = {"a": round(sum(xs) / len(xs), 6), "b": round(sum(ys) / len(ys), 6),
                              **interval.to_dict()}
    return {"a": a, "b": b, "outcomes": outcomes,
            "counts": {k: len(v) for k, v in outcomes.items()}, "difference": difference,
            "mcnemar": mcnemar(len(outcomes["a_only"]), len(outcomes["b_only"])).to_dict()}


def per_run(run: RunOutcomes, shared: list[str], everywhere: list[str]) -> dict[str, Any]:
    attempts = [a for t in shared for a in run.tasks[t]]
    solves = sum(a.resolved for a in attempts)
    values = [task_values(run.tasks[t]) for t in shared]
    out: dict[str, Any] = {
        "tasks": len(shared), "attempts": len(attempts), "resolved_attempts": solves,
        **{m: round(sum(v[m] for v in values) / len(values), 6) for m in METRICS}}
    for key, attr in SPENT:
        known = [getattr(a, attr) for a in attempts if getattr(a, attr) is not None]
        total = sum(known)
        out[key] = {"total": round(total, 6), "per_solve": round(total / solves, 6) if solves else None}
    out["cost_usd"]["unpriced_attempts"] = sum(a.cost is None for a in attempts)
    out["when_solved"] = _when_solved(run, everywhere)
    out["tools"] = _tools(attempts)
    return out


def _when_solved(run: RunOutcomes, tasks: list[str]) -> dict[str, Any]:
    solved = [a for t in tasks for a in run.tasks[t] if a.resolved]
    out: dict[str, Any] = {"tasks": len(tasks), "attempts": len(solved)}
    for key, attr in SPENT:
        known = [getattr(a, attr) for a in solved if getattr(a, attr) is not None]
        out[key] = round(sum(known) / len(known), 6) if known else None
    return out


def _tools(attempts: list[Attempt]) -> dict[str, dict[str, Any]]:
    totals: dict[str, list[int]] = {}
    for attempt in attempts:
        for name, calls, failed in attempt.tools:
            entry = totals.setdefault(name, [0, 0, 0])
            entry[0] += calls
            entry[1] += failed
            entry[2] += 1
    return {name: {"calls": c, "failed": f, "attempts_using": u,
                   "per_attempt": round(c / len(attempts), 4)}
            for name, (c, f, u) in sorted(totals.items(), key=lambda kv: (-kv[1][0], kv[0]))}
