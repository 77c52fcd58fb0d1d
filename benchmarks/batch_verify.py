"""Verified batch benchmarks: where a task's time goes, the verifier's cost, scale, pass@k.

    batch_overhead    200 replay tasks (3 model calls, 2 tool calls each) with 1, 2, 4 and 8
                      local workers on this machine, 3 rounds (medians): wall, tasks/min,
                      the wall against as many workers as cores, and the time per task
                      outside the model (duration - model time; at 1 worker nothing competes
                      for the CPU, so that is the overhead itself). More workers than cores
                      must not be slower than as many as cores.
    batch_verifier    the check's cost per task: 60 tasks with `--agent nop` and a check that
                      does nothing (`true`), on this machine and in a podman container: the
                      verifier's own time (staging, the script, reading the reward) per task.
    batch_scale       1,000 tasks x 2 attempts with the replay model, each checked: the local
                      executor against a Ray cluster on this machine (its start counted once,
                      in the run's wall time), tasks/min and peak memory of every process.
    passk_synthetic   a synthetic dataset with known per-task success probabilities, run for
                      real (`--agent nop`, a check that passes with that probability, seeded by
                      task and attempt): statistics.json's pass@k against the estimator on the
                      realized counts (must be exact) and against 1 - (1 - p)^k (sampling error).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from math import comb
from pathlib import Path
from typing import Any

from benchmarks.batch import SCENARIO
from benchmarks.ray_cluster import process_tree

OVERHEAD_TARGET_MS = 100.0
SWEEP_TASKS = 200
SWEEP_WORKERS = (1, 2, 4, 8)
SWEEP_ROUNDS = 3
VERIFIER_TASKS = 60
SCALE_TASKS, SCALE_ATTEMPTS = 1000, 2
SYNTHETIC_P = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)
SYNTHETIC_PER_P, SYNTHETIC_ATTEMPTS = 8, 10


def _env(root: Path) -> dict[str, str]:
    saved = dict(os.environ)
    os.environ.update(TALARIA_HOME=str(root / "home"), RAY_AUTH_MODE="disabled",
                      RAY_USAGE_STATS_ENABLED="0")
    return saved


def _restore(saved: dict[str, str]) -> None:
    os.environ.clear()
    os.environ.update(saved)


def _tasks(root: Path, name: str, count: int, check: str | None = "test -f out.txt",
           **more: Any) -> Path:
    path = root / f"{name}.jsonl"
    path.write_text("".join(json.dumps({"id": f"t{i}", "prompt": f"write out.txt task {i}",
                                        **({"check": check} if check else {}), **more}) + "\n"
                            for i in range(count)))
    return path


def _run(root: Path, tasks: Path, name: str, **options: Any) -> tuple[Any, float]:
    from talaria.agent.trajectories.batch.runner import BatchOptions, run_batch

    started = time.perf_counter()
    result = run_batch(BatchOptions(tasks_file=tasks, run_name=name, output_dir=root / "data",
                                    **options), progress_out=None)
    return result, time.perf_counter() - started


def _scenario(root: Path) -> str:
    path = root / "scenario.json"
    path.write_text(json.dumps(SCENARIO))
    return f"replay:{path}"


def batch_overhead() -> Iterator[dict[str, Any]]:
    runs: dict[int, list[tuple[float, float, float, int]]] = {w: [] for w in SWEEP_WORKERS}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        saved = _env(root)
        try:
            model = _scenario(root)
            tasks = _tasks(root, "tasks", SWEEP_TASKS, check=None)
            for n in range(SWEEP_ROUNDS):  # the worker counts take turns: drift hits all alike
                for workers in SWEEP_WORKERS:
                    result, wall = _run(root, tasks, f"w{workers}-{n}", workers=workers,
                                        model=model)
                    stats = result.statistics
                    outside = (stats["duration_s"]["mean"] - stats["model_s"]["mean"]) * 1000
                    runs[workers].append((wall, outside, stats["run"]["bookkeeping_ms_per_task"],
                                          result.completed))
        finally:
            _restore(saved)
    cores = len(os.sched_getaffinity(0))
    at_cores = statistics.median(r[0] for r in runs[min(cores, max(SWEEP_WORKERS))])
    for workers, got in runs.items():
        wall = statistics.median(r[0] for r in got)
        yield {"metric": "batch_overhead", "workers": workers, "tasks": SWEEP_TASKS,
               "completed": min(r[3] for r in got), "rounds": SWEEP_ROUNDS,
               "wall_s": round(wall, 2), "wall_s_per_round": [round(r[0], 2) for r in got],
               "vs_as_many_workers_as_cores": round(wall / at_cores, 2),
               "tasks_per_minute": round(SWEEP_TASKS / wall * 60, 1),
               "ms_per_task_outside_model": round(statistics.median(r[1] for r in got), 1),
               "runner_bookkeeping_ms_per_task": round(statistics.median(r[2] for r in got), 3),
               "target_ms": OVERHEAD_TARGET_MS, "cpus": cores,
               "note": "medians of the rounds; at 1 worker nothing competes: the overhead "
                       "itself; above the core count a task also waits for a CPU"}


def batch_verifier() -> Iterator[dict[str, Any]]:
    from benchmarks import env_image

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        saved = _env(root)
        try:
            places: list[tuple[str, str | None]] = [("local", None)]
            why = env_image.missing()
            if why:
                yield {"metric": "batch_verifier", "place": "container", "skipped": why}
            else:
                places.append(("container", f"docker:{env_image.ensure_image()}"))
            for place, environment in places:
                count = VERIFIER_TASKS if place == "local" else VERIFIER_TASKS // 3
                timings = {}
                for checked in (False, True):
                    tasks = _tasks(root, f"{place}-{checked}", count, check="true" if checked else None,
                                   **({"environment": environment} if environment else {}))
                    result, wall = _run(root, tasks, f"{place}-{checked}", workers=2, agent="nop")
                    timings[checked] = (result, wall)
                lines = [json.loads(x) for x in
                         (timings[True][0].run_dir / "trajectories.jsonl").read_text().splitlines()]
                verifier = sorted(r["verifier"]["duration_s"] for r in lines)
                plain = timings[False][0].statistics["duration_s"]["mean"]
                checked_mean = timings[True][0].statistics["duration_s"]["mean"]
                yield {"metric": "batch_verifier", "place": place, "tasks": count,
                       "resolved": sum(r["resolved"] for r in lines),
                       "verifier_ms_mean": round(sum(verifier) / len(verifier) * 1000, 1),
                       "verifier_ms_p50": round(verifier[len(verifier) // 2] * 1000, 1),
                       "task_ms_without_check": round(plain * 1000, 1),
                       "task_ms_with_check": round(checked_mean * 1000, 1),
                       "workers": 2, "cpus": os.cpu_count()}
        finally:
            _restore(saved)


class MemoryPeak:
    """Peak summed RSS of a set of process groups / trees, sampled every `every` seconds."""

    def __init__(self, roots: list[int], every: float = 0.5) -> None:
        self.roots = set(roots)
        self.every = every
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        page = os.sysconf("SC_PAGE_SIZE")
        while not self._stop.wait(self.every):
            total = 0
            for pid in process_tree(self.roots):
                try:
                    total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
                except (OSError, ValueError):
                    continue
            self.peak = max(self.peak, total)

    def __enter__(self) -> MemoryPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def batch_scale() -> Iterator[dict[str, Any]]:
    from benchmarks.ray_cluster import RayCluster, missing

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        saved = _env(root)
        try:
            model = _scenario(root)
            tasks = _tasks(root, "scale", SCALE_TASKS)
            total = SCALE_TASKS * SCALE_ATTEMPTS
            with MemoryPeak([os.getpid()]) as memory:
                result, wall = _run(root, tasks, "local", workers=4, model=model,
                                    attempts=SCALE_ATTEMPTS)
            yield _scale_line("local", result, wall, memory.peak, total)
            why = missing()
            if why:
                yield {"metric": "batch_scale", "executor": "ray", "skipped": why}
                return
            started = time.perf_counter()
            with RayCluster(nodes=1, cpus=4) as cluster, MemoryPeak(
                    [os.getpid(), *(p.pid for p in cluster.procs)]) as memory:
                result, wall = _run(root, tasks, "ray", workers=4, model=model,
                                    attempts=SCALE_ATTEMPTS, executor="ray",
                                    address=cluster.address)
                yield {**_scale_line("ray", result, time.perf_counter() - started, memory.peak,
                                     total), "cluster_start_s": round(cluster.start_s, 2),
                       "wall_s_without_start": round(wall, 2),
                       "note": "wall_s counts the cluster's start once (ray start of a head "
                               "node with 4 CPUs on this machine)"}
        finally:
            _restore(saved)


def _scale_line(executor: str, result: Any, wall: float, peak: int, total: int) -> dict[str, Any]:
    verified = result.statistics["verification"]
    return {"metric": "batch_scale", "executor": executor, "attempts_run": result.ran,
            "expected": total, "resolved": verified["resolved"], "wall_s": round(wall, 2),
            "tasks_per_minute": round(result.ran / wall * 60, 1),
            "peak_rss_mb": round(peak / 2**20, 1), "workers": 4, "cpus": os.cpu_count()}


CHECK = ("python3 -c \"import hashlib, os, sys; h = hashlib.sha256((os.environ['TALARIA_TASK_ID'] "
         "+ ':' + os.environ['TALARIA_ATTEMPT']).encode()).digest(); "
         "sys.exit(int.from_bytes(h[:8], 'big') / 2**64 >= float(os.environ['P']))\"")


def passk_synthetic() -> Iterator[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        saved = _env(root)
        try:
            tasks = root / "synthetic.jsonl"
            p_of = {f"p{p}-{i}": p for p in SYNTHETIC_P for i in range(SYNTHETIC_PER_P)}
            tasks.write_text("".join(json.dumps({"id": task, "prompt": "nothing", "check": {
                "command": CHECK, "env": {"P": str(p)}}}) + "\n" for task, p in p_of.items()))
            result, wall = _run(root, tasks, "synthetic", workers=2, agent="nop",
                                attempts=SYNTHETIC_ATTEMPTS)
            verified = result.statistics["verification"]
            n = SYNTHETIC_ATTEMPTS
            worst_exact = worst_expected = 0.0
            per_k = {}
            for k in range(1, n + 1):
                realized = [1 - comb(n - t["resolved"], k) / comb(n, k)
                            for t in verified["per_task"].values()]
                exact = sum(realized) / len(realized)
                expected = sum(1 - (1 - p) ** k for p in p_of.values()) / len(p_of)
                got = verified["pass_at"][str(k)]
                worst_exact = max(worst_exact, abs(got - exact))
                worst_expected = max(worst_expected, abs(got - expected))
                per_k[str(k)] = {"reported": got, "expected": round(expected, 6)}
            yield {"metric": "passk_synthetic", "tasks": len(p_of), "attempts_per_task": n,
                   "attempts_run": result.ran, "wall_s": round(wall, 2),
                   "max_abs_diff_vs_estimator_on_counts": round(worst_exact, 9),
                   "exact": worst_exact < 1e-6,
                   "max_abs_diff_vs_true_expectation": round(worst_expected, 4),
                   "pass_at": per_k,
                   "note": "the estimator is unbiased: the gap to 1-(1-p)^k is sampling error "
                           f"({len(p_of)} tasks x {n} attempts)"}
        finally:
            _restore(saved)


BENCHMARKS = {"batch_overhead": batch_overhead, "batch_verifier": batch_verifier,
              "batch_scale": batch_scale, "passk_synthetic": passk_synthetic}
