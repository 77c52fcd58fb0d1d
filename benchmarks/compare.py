"""`talaria trajectories compare` benchmarks: its cost at scale, and its interval's width.

    compare_scale     two synthetic 1,000-task runs (batch lines as `talaria batch` writes them:
                      a ShareGPT conversation of 12 turns, tool_stats over 11 tools, verdict,
                      cost), 15% of the tasks differently solved: the real command in a child
                      process, its wall time and peak RSS, and the phases in process (read both
                      runs, pair and bootstrap, render the page).
    bootstrap_width   the paired bootstrap's 95% interval on synthetic data with a known
                      difference (A solves 50%, B 60%, independently per task) as n grows, 10
                      datasets per n: the mean width against the normal approximation's
                      2 * 1.96 * sd / sqrt(n) (sd^2 = 0.25 + 0.24 here, so 1.372 / sqrt(n)), its
                      ratio to the width at half the n (expected 1/sqrt(2)), how many intervals
                      cover 0.1; and at n = 100 the share of 200 datasets whose interval covers
                      it (nominal 0.95).
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SCALE_TASKS = 1000
TOOLS = ("read_file", "write_file", "patch", "search_files", "terminal", "process", "todo",
         "execute_code", "session_search", "delegate_task", "clarify")
WIDTH_N = (50, 100, 200, 400, 800, 1600, 3200)
WIDTH_DATASETS, WIDTH_RESAMPLES = 10, 1000
COVERAGE_N, COVERAGE_DATASETS = 100, 200


def _line(task: int, solved: bool, rng: random.Random, run: str) -> dict[str, Any]:
    turns = [{"from": "system", "value": "You are a function calling AI model. " * 40},
             {"from": "human", "value": f"fix the failing test in module {task} " * 5}]
    calls = rng.randint(3, 6)
    for i in range(calls):
        name = rng.choice(TOOLS[:5])
        turns.append({"from": "gpt", "value": f"<think>\n</think>\nstep {i}\n<tool_call>\n"
                      + json.dumps({"name": name, "arguments": {"path": f"src/m{task}.py"}})
                      + "\n</tool_call>"})
        turns.append({"from": "tool", "value": "<tool_response>\n" + json.dumps(
            {"tool_call_id": f"c{i}", "name": name, "content": {"output": "x" * rng.randint(200, 1500)}})
            + "\n</tool_response>"})
    turns.append({"from": "gpt", "value": "done"})
    return {"prompt_index": task, "conversations": turns, "completed": True, "partial": False,
            "api_calls": calls + 1,
            "tool_stats": {t: {"count": 1 if i < 5 else 0, "success": 1 if i < 5 else 0, "failure": 0}
                           for i, t in enumerate(TOOLS)},
            "task_id": f"task-{task:04d}", "attempt": 1, "agent": "talaria", "status": "completed",
            "reason": "end_turn", "model": f"openai:{run}", "turns": calls + 1,
            "tokens": {"input": rng.randint(5000, 20000), "output": rng.randint(300, 2000)},
            "duration_s": rng.uniform(5, 60), "cost_usd": rng.uniform(0.01, 0.2),
            "reward": float(solved), "resolved": solved, "toolsets": "core", "tags": []}


def _runs(root: Path) -> tuple[Path, Path]:
    rng = random.Random(1)
    paths = []
    outcomes = [rng.random() < 0.55 for _ in range(SCALE_TASKS)]
    for run, flip in (("a", 0.0), ("b", 0.15)):
        directory = root / run
        directory.mkdir()
        with (directory / "trajectories.jsonl").open("w", encoding="utf-8") as out:
            for task, solved in enumerate(outcomes):
                mine = (not solved) if rng.random() < flip else solved
                out.write(json.dumps(_line(task, mine, rng, run)) + "\n")
        paths.append(directory)
    return paths[0], paths[1]


def compare_scale() -> Iterator[dict[str, Any]]:
    from talaria.agent.trajectories.compare.build import compare_runs
    from talaria.agent.trajectories.compare.outcomes import read_run
    from talaria.agent.trajectories.compare.page import render_compare
    from talaria.agent.trajectories.compare.paired import LEVEL, RESAMPLES, SEED

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        a, b = _runs(root)
        size = sum((p / "trajectories.jsonl").stat().st_size for p in (a, b))
        started = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", "talaria.acp_server.cli.main", "trajectories",
                                  "compare", str(a), str(b), "-o", str(root / "c.html")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        assert child.stderr is not None
        errors = child.stderr.read().decode()
        child.stderr.close()
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode:
            raise RuntimeError(f"compare failed: {errors}")
        phases = {}
        mark = time.perf_counter()
        runs = [read_run(a, "a"), read_run(b, "b")]
        phases["read_s"] = time.perf_counter() - mark
        mark = time.perf_counter()
        data = compare_runs(runs, resamples=RESAMPLES, seed=SEED, level=LEVEL)
        phases["pair_and_bootstrap_s"] = time.perf_counter() - mark
        mark = time.perf_counter()
        page = render_compare(data)
        phases["render_s"] = time.perf_counter() - mark
        pair = data["comparisons"][0]
        yield {"metric": "compare_scale", "tasks": SCALE_TASKS, "runs": 2,
               "input_mb": round(size / 1e6, 1), "wall_s": round(wall, 3),
               "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
               **{k: round(v, 3) for k, v in phases.items()},
               "page_kb": round(len(page) / 1024, 1),
               "json_kb": round((root / "c.json").stat().st_size / 1024, 1),
               "resamples": RESAMPLES, "diff": pair["difference"]["pass_at_1"]["diff"],
               "ci": pair["difference"]["pass_at_1"]["ci"], "mcnemar": pair["mcnemar"],
               "cpus": os.cpu_count(),
               "note": "wall and peak RSS are the child `talaria trajectories compare` "
                       "(interpreter start and imports included)"}


def _dataset(n: int, seed: int) -> tuple[list[float], list[float]]:
    rng = random.Random(seed)
    return ([float(rng.random() < 0.5) for _ in range(n)],
            [float(rng.random() < 0.6) for _ in range(n)])


def bootstrap_width() -> Iterator[dict[str, Any]]:
    from talaria.agent.trajectories.compare.paired import bootstrap_diff

    truth, previous = 0.1, None
    for n in WIDTH_N:
        widths, normals, covered = [], [], 0
        started = time.perf_counter()
        for i in range(WIDTH_DATASETS):
            a, b = _dataset(n, seed=n * 1000 + i)
            got = bootstrap_diff(a, b, resamples=WIDTH_RESAMPLES, seed=i)
            d = [y - x for x, y in zip(a, b, strict=True)]
            mean = sum(d) / n
            normals.append(2 * 1.96 * math.sqrt(sum((v - mean) ** 2 for v in d) / n / n))
            widths.append(got.high - got.low)
            covered += got.low <= truth <= got.high
        width = sum(widths) / len(widths)
        yield {"metric": "bootstrap_width", "n": n, "true_diff": truth, "datasets": WIDTH_DATASETS,
               "resamples": WIDTH_RESAMPLES, "mean_width": round(width, 4),
               "width_range": [round(min(widths), 4), round(max(widths), 4)],
               "normal_width": round(sum(normals) / len(normals), 4),
               "expected_width": round(2 * 1.96 * math.sqrt(0.49 / n), 4),
               "covered": f"{covered}/{WIDTH_DATASETS}",
               "width_ratio_to_half_n": round(width / previous, 3) if previous else None,
               "expected_ratio": round(1 / math.sqrt(2), 3),
               "seconds_per_interval": round((time.perf_counter() - started) / WIDTH_DATASETS, 3)}
        previous = width
    covered = 0
    started = time.perf_counter()
    for seed in range(COVERAGE_DATASETS):
        a, b = _dataset(COVERAGE_N, seed=10_000 + seed)
        got = bootstrap_diff(a, b, resamples=1000, seed=seed)
        covered += got.low <= truth <= got.high
    yield {"metric": "bootstrap_coverage", "n": COVERAGE_N, "datasets": COVERAGE_DATASETS,
           "coverage": round(covered / COVERAGE_DATASETS, 3), "nominal": 0.95,
           "seconds": round(time.perf_counter() - started, 2)}


BENCHMARKS = {"compare_scale": compare_scale, "bootstrap_width": bootstrap_width}
