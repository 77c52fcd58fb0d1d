"""Batch runner and trajectory compressor benchmarks.

    batch                 200 scripted tasks (write a file, read it back, report: 3 model calls,
                          2 tool calls each), 8 workers, an instant model (the replay provider
                          playing a recorded scenario per task); local worker processes, then
                          a local Ray instance of this machine's CPUs (cold: its actors start
                          in the run), then WARM_ROUNDS of the local executor and warm Ray
                          (the actors reused) in turn: `batch_ray_warm_vs_local`, medians.
                          Overhead per task outside the model = time in the worker minus time
                          in model calls, plus the runner's bookkeeping (trajectory append +
                          fsync + checkpoint).
    batch_model_time      12 one-call tasks, 3 workers, the model taken from the configuration
                          (no --model), a canned OpenAI endpoint on loopback answering after
                          MODEL_DELAY_S, through the real SDK: model_s of
                          each worker's first task against the others'. The SDK import (seconds
                          on a loaded machine) is set-up, so both should sit near the delay.
    trajectory_compress   1,000 ShareGPT trajectories of ~50K tokens, an instant summarizer,
                          the default 29K budget: every one must end under it.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import string
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TASKS = 200
WORKERS = 8
WARM_ROUNDS = 3
OVERHEAD_TARGET_MS = 100.0


SCENARIO = {"turns": [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "a task"}}]},
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "out.txt"}}]},
    {"text": "Wrote out.txt and read it back."},
]}
"""What every batch task's model does (a recording, replayed: no model, no network)."""


def _run(executor: str, root: Path, name: str | None = None) -> dict[str, Any]:
    from talaria.agent.trajectories.batch.runner import BatchOptions, run_batch

    name = name or executor
    scenario = root / "scenario.json"
    scenario.write_text(json.dumps(SCENARIO))
    tasks = root / f"tasks-{name}.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"t{i}", "prompt": f"write out.txt task {i}"})
                             + "\n" for i in range(TASKS)))
    started = time.perf_counter()
    result = run_batch(BatchOptions(tasks_file=tasks, run_name=name, output_dir=root / "data",
                                    workers=WORKERS, model=f"replay:{scenario}",
                                    executor=executor),
                       progress_out=None)
    wall = time.perf_counter() - started
    stats = result.statistics
    outside = (stats["duration_s"]["mean"] - stats["model_s"]["mean"]) * 1000
    overhead = outside + stats["run"]["bookkeeping_ms_per_task"]
    return {"metric": "batch_throughput", "executor": executor, "tasks": TASKS,
            "workers": WORKERS, "completed": result.completed,
            "model_calls": sum(json.loads(line).get("turns", 0) for line in
                               (result.run_dir / "trajectories.jsonl").read_text().splitlines()),
            "wall_s": round(wall, 2), "tasks_per_minute": round(TASKS / wall * 60, 1),
            "overhead_ms_per_task": round(overhead, 1),
            "worker_ms_outside_model": round(outside, 1),
            "bookkeeping_ms_per_task": stats["run"]["bookkeeping_ms_per_task"],
            "model_ms_per_task": round(stats["model_s"]["mean"] * 1000, 1),
            "target_overhead_ms": OVERHEAD_TARGET_MS, "cpus": os.cpu_count()}


def batch() -> Iterator[dict[str, Any]]:
    saved = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ.update(TALARIA_HOME=str(root / "home"), RAY_AUTH_MODE="disabled")
        try:
            yield _run("local", root)
            try:
                import ray
            except ImportError:
                yield {"metric": "batch_throughput", "executor": "ray",
                       "skipped": "ray is not installed (pip install ray)"}
                return
            started = time.perf_counter()
            ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False,
                     _node_ip_address="127.0.0.1")
            try:
                ray_start = time.perf_counter() - started
                cold = _run("ray", root)
                yield {**cold, "ray_start_s": round(ray_start, 2),
                       "wall_s_with_start": round(cold["wall_s"] + ray_start, 2),
                       "note": "cold: the run starts its Ray actors (one per CPU, each "
                               "importing Talaria) within wall_s; the instance's start is "
                               "counted once, in wall_s_with_start"}
                # local and warm Ray take turns: load drift hits both alike
                pairs = [(_run("local", root, f"local-{n}"), _run("ray", root, f"ray-warm-{n}"))
                         for n in range(WARM_ROUNDS)]
                local = statistics.median(p[0]["wall_s"] for p in pairs)
                warm = statistics.median(p[1]["wall_s"] for p in pairs)
                yield {"metric": "batch_ray_warm_vs_local", "tasks": TASKS, "workers": WORKERS,
                       "rounds": WARM_ROUNDS, "local_wall_s": round(local, 2),
                       "ray_warm_wall_s": round(warm, 2), "warm_vs_local": round(warm / local, 2),
                       "per_round": [[p[0]["wall_s"], p[1]["wall_s"]] for p in pairs],
                       "ray_warm_overhead_ms_per_task": statistics.median(
                           p[1]["overhead_ms_per_task"] for p in pairs),
                       "local_overhead_ms_per_task": statistics.median(
                           p[0]["overhead_ms_per_task"] for p in pairs),
                       "completed": min(r["completed"] for p in pairs for r in p),
                       "target": "warm_vs_local <= 1",
                       "note": "warm: later runs of this process on the same Ray instance (the "
                               "first run's actors reused); local: a run of the local executor "
                               "(its forkserver and workers started in the run, as every "
                               "`talaria batch` does)"}
            finally:
                ray.shutdown()
        finally:
            os.environ.clear()
            os.environ.update(saved)


MODEL_DELAY_S = 0.05


def batch_model_time() -> Iterator[dict[str, Any]]:
    from benchmarks.canned_llm import CannedLLM
    from talaria.agent.trajectories.batch.runner import BatchOptions, run_batch

    saved = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp, CannedLLM(delay=MODEL_DELAY_S) as llm:
        root = Path(tmp)
        os.environ.update(OPENAI_API_KEY="sk-bench", OPENAI_BASE_URL=llm.openai_base_url,
                          TALARIA_HOME=str(root / "home"), TALARIA_MODEL="openai:fake")
        try:
            tasks = root / "tasks.jsonl"
            tasks.write_text("".join(json.dumps({"id": f"t{i}", "prompt": f"hello {i}"}) + "\n"
                                     for i in range(12)))
            result = run_batch(BatchOptions(tasks_file=tasks, run_name="m", output_dir=root,
                                            workers=3), progress_out=None)
            rows = [json.loads(x) for x in (result.run_dir / "trajectories.jsonl").read_text().splitlines()]
        finally:
            os.environ.clear()
            os.environ.update(saved)
    first, rest = [r["model_s"] for r in rows[:3]], sorted(r["model_s"] for r in rows[3:])
    yield {"metric": "batch_model_time", "completed": result.completed, "tasks": len(rows),
           "first_tasks_model_s": first, "other_tasks_model_s_median": rest[len(rest) // 2],
           "first_tasks_duration_s": [r["duration_s"] for r in rows[:3]],
           "fake_model_delay_s": MODEL_DELAY_S,
           "note": "the first lines written are each worker's first task (3 workers)"}


COMPRESS_TRAJECTORIES = 1_000
TURN_POOL = 300


def _synthetic(path: Path, count: int, rng: random.Random) -> int:
    """`count` trajectories of ~50K tokens: a task, then gpt tool calls and tool outputs drawn
    from a pool of varied texts (every turn numbered, so no two trajectories are alike)."""
    def text(words: int) -> str:
        return " ".join("".join(rng.choices(string.ascii_lowercase + "_./", k=rng.randint(2, 9)))
                        for _ in range(words))

    pool = [text(rng.randint(300, 900)) for _ in range(TURN_POOL)]
    size = 0
    with path.open("w", encoding="utf-8") as out:
        for n in range(count):
            turns = [{"from": "system", "value": "You are a coding agent. " + pool[0][:2000]},
                     {"from": "human", "value": f"Task {n}: " + pool[1][:1500]}]
            for step in range(30):
                call = {"name": "terminal", "arguments": {"command": f"cat src/file_{n}_{step}.py"}}
                turns.append({"from": "gpt", "value": f"Step {step}.\n<tool_call>\n"
                              f"{json.dumps(call)}\n</tool_call>"})
                turns.append({"from": "tool", "value": f"<tool_response>{step}:"
                              f"{rng.choice(pool)}</tool_response>"})
            turns.append({"from": "gpt", "value": "Done: " + pool[2][:800]})
            line = json.dumps({"id": n, "conversations": turns}) + "\n"
            size += len(line)
            out.write(line)
    return size


class InstantSummarizer:
    async def summarize(self, instructions: str, transcript: str) -> str:
        return "The agent read the source files one by one and noted their contents."


def trajectory_compress() -> Iterator[dict[str, Any]]:
    from talaria.agent.trajectories.compress.api import CompressOptions, compress_file

    with tempfile.TemporaryDirectory() as tmp:
        source, output = Path(tmp) / "in.jsonl", Path(tmp) / "out.jsonl"
        size = _synthetic(source, COMPRESS_TRAJECTORIES, random.Random(2026))
        options = CompressOptions(workers=os.cpu_count() or 1)
        started = time.perf_counter()
        report = compress_file(source, output, options, summarizer=InstantSummarizer())
        wall = time.perf_counter() - started
    aggregate = report["aggregate"]
    yield {"metric": "trajectory_compress", "trajectories": aggregate["trajectories"],
           "input_mb": round(size / 1e6, 1),
           "mean_original_tokens": aggregate["original_tokens"] // aggregate["trajectories"],
           "target_tokens": options.target_tokens, "compressed": aggregate["compressed"],
           "still_over_limit": aggregate["still_over_limit"],
           "all_under_budget": aggregate["still_over_limit"] == 0,
           "max_compressed_tokens": max(m["compressed_tokens"] for m in report["trajectories"]),
           "compression_ratio": aggregate["compression_ratio"], "wall_s": round(wall, 2),
           "target_wall_s": 60, "workers": options.workers, "cpus": os.cpu_count()}


BENCHMARKS = {"batch": batch, "batch_model_time": batch_model_time,
              "trajectory_compress": trajectory_compress}
