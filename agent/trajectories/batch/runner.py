"""The batch runner: many tasks, each in its own workspace, up to `workers` at a time.

    result = run_batch(BatchOptions(tasks_file=Path("tasks.jsonl"), run_name="r1", workers=8))

Output in `output_dir/run_name/` (see checkpoint.py): `trajectories.jsonl` (one line per finished
task), `checkpoint.json`, `statistics.json`, `attempts.jsonl` (failed lines replaced by
`--retry-failed`), `logs/` (worker output, when there is any) and, while a run lasts,
`tasks/<id>/workspace` and `homes/worker-N/` (each local worker's TALARIA_HOME).
Only this process writes results; executors return records. With `resume`, finished tasks are
skipped by id; options not given again are taken from the run's checkpoint; `statistics.json`
covers every invocation (see stats.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import re
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio

from talaria.agent.trajectories.batch.checkpoint import STATISTICS, RunDir, write_json_atomic
from talaria.agent.trajectories.batch.executors import Executor, LocalExecutor, RayExecutor
from talaria.agent.trajectories.batch.progress import Progress
from talaria.agent.trajectories.batch.records import trajectory_line
from talaria.agent.trajectories.batch.stats import compute
from talaria.agent.trajectories.batch.tasks import Task, TaskFileError, load_tasks
from talaria.agent.trajectories.batch.worker import DEFAULT_TIMEOUT_S, resolve_tools

MAX_WORKERS = 256
RESUMABLE = ("model", "max_turns", "toolsets", "task_timeout", "executor", "address",
             "environment")
"""Options a `--resume` takes from the checkpoint when they are not given again."""


@dataclass(frozen=True, slots=True)
class BatchOptions:
    tasks_file: Path
    run_name: str
    output_dir: Path = Path("data")
    """Runs go in `output_dir/run_name/`."""
    workers: int = 4
    """Tasks running at once."""
    model: str | None = None
    """Model for tasks without their own (default: the configured model)."""
    max_turns: int | None = None
    """Model calls allowed per task (default: the configured max_turns)."""
    toolsets: tuple[str, ...] | None = None
    """Toolsets or tool names for tasks without their own (default: the core tools)."""
    resume: bool = False
    """Continue a run: skip every task already recorded."""
    retry_failed: bool = False
    """Re-run only the tasks recorded as failed."""
    executor: str | None = None
    """"local" (worker processes, the default) or "ray"."""
    address: str | None = None
    """Ray cluster address (default: start a local Ray instance)."""
    task_timeout: float | None = None
    """Wall seconds per task (default DEFAULT_TIMEOUT_S)."""
    keep_workspaces: bool = False
    """Keep `tasks/<id>/` after each task (for inspection)."""
    environment: str | None = None
    """Where tasks without their own run (NAME[:ARG]; default: the configured environment)."""
    no_checkpoints: bool = False
    """Take no checkpoints of task workspaces (`--no-checkpoints`)."""


@dataclass(frozen=True, slots=True)
class BatchResult:
    run_dir: Path
    total: int
    ran: int
    completed: int
    failed: int
    statistics: dict[str, Any] = field(repr=False)


def task_dir_name(task_id: str) -> str:
    """A directory name for any id: readable prefix + hash (ids may hold '/', '..', spaces)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", task_id)[:48].lstrip(".") or "task"
    return f"{safe}-{hashlib.sha256(task_id.encode()).hexdigest()[:8]}"


def check_options(options: BatchOptions) -> None:
    """Raise ValueError for options that cannot run."""
    name = options.run_name
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        raise ValueError(f"--run-name {name!r}: use a plain directory name")
    if not 1 <= options.workers <= MAX_WORKERS:
        raise ValueError(f"--workers must be between 1 and {MAX_WORKERS}")
    if options.executor not in (None, "local", "ray"):
        raise ValueError(f"--executor {options.executor!r}: choose local or ray")
    if options.executor == "ray" and importlib.util.find_spec("ray") is None:
        raise ValueError("--executor ray needs Ray on this machine: pip install ray")
    if options.task_timeout is not None and options.task_timeout <= 0:
        raise ValueError("--task-timeout must be positive")
    if options.toolsets:
        resolve_tools(options.toolsets)


def _effective(options: BatchOptions, previous: dict[str, Any]) -> dict[str, Any]:
    values = {name: getattr(options, name) for name in RESUMABLE}
    for name in RESUMABLE:
        if values[name] is None and previous.get(name) is not None:
            values[name] = previous[name]
    values["executor"] = values["executor"] or "local"
    values["task_timeout"] = float(values["task_timeout"] or DEFAULT_TIMEOUT_S)
    if values["toolsets"] is not None:
        values["toolsets"] = list(values["toolsets"])
    return values


def make_executor(
    kind: str, *, workers: int, address: str | None, run_dir: Path, models: tuple[str, ...] = (),
    keep: bool = False,
) -> Executor:
    if kind == "ray":
        return RayExecutor(address=address, num_cpus=workers)
    return LocalExecutor(workers, run_dir=run_dir, preload=models, keep_homes=keep)


def run_batch(
    options: BatchOptions, *, progress_out: TextIO | None = sys.stderr,
    executor: Executor | None = None,
) -> BatchResult:
    """Run the pending tasks of `options`. Raises TaskFileError, RunExistsError, ValueError."""
    check_options(options)
    tasks = load_tasks(options.tasks_file)
    if not tasks:
        raise TaskFileError(f"{options.tasks_file}: no tasks (one JSON object per line, e.g. "
                            '{"prompt": "fix the failing test", "workspace": "project"})')
    run_dir = options.output_dir / options.run_name
    meta: dict[str, Any] = {"run_name": options.run_name,
                            "tasks_file": str(options.tasks_file.resolve()),
                            "total_tasks": len(tasks)}
    run = RunDir.open(run_dir, meta=meta, resume=options.resume or options.retry_failed)
    try:
        effective = _effective(options, run.previous_options)
        run.meta["options"] = effective
        progress = Progress(len(tasks), out=progress_out,
                            done=sum(t.id in run.finished for t in tasks),
                            failed=sum(run.finished.get(t.id) == "failed" for t in tasks))
        if options.retry_failed:
            pending = [t for t in tasks if run.finished.get(t.id) == "failed"]
            progress.retried(run.take_failed({t.id for t in pending}))
        else:
            pending = [t for t in tasks if t.id not in run.finished]
        this_run: dict[str, Any] = {
            "started_at": round(time.time(), 3), "executor": effective["executor"],
            "workers": options.workers, "tasks_run": 0, "wall_s": 0.0, "bookkeeping_ms": 0.0,
            "resume": options.resume, "retry_failed": options.retry_failed}
        run.meta["runs"] = [*run.previous_runs, this_run]
        run.write_checkpoint()
        default = effective["model"] or _configured_model()
        models = {m for t in pending if (m := t.model or default)}
        executor = executor or make_executor(
            effective["executor"], workers=max(1, min(options.workers, len(pending))),
            address=effective["address"], run_dir=run_dir, models=tuple(sorted(models)),
            keep=options.keep_workspaces)
        clock = {"started": time.monotonic()}
        try:
            anyio.run(_drive, pending, executor, run, progress, effective, options, this_run, clock)
        finally:
            progress.draw(final=True)
            this_run["tasks_run"] = progress.ran
            this_run["wall_s"] = round(time.monotonic() - clock["started"], 3)
            # An invocation with nothing to do leaves no entry; one interrupted before its
            # first task finished still counts as one.
            runs = [*run.previous_runs, *([this_run] if this_run["tasks_run"] or pending else [])]
            run.meta["runs"] = runs
            run.write_checkpoint()
            ids = {t.id for t in tasks}  # this file's tasks (a line removed since is not counted)
            statistics = compute((r for r in run.records() if str(r["task_id"]) in ids), runs=runs)
            write_json_atomic(run_dir / STATISTICS, statistics)
    finally:
        run.close()
    tasks_stats = statistics["tasks"]
    return BatchResult(run_dir, len(tasks), progress.ran, tasks_stats["completed"],
                       tasks_stats["failed"], statistics)


def _configured_model() -> str | None:
    """The configured default model (for the SDK preload), or None when there is none."""
    from talaria.agent.config import load_config

    try:
        return load_config().model
    except ValueError:
        return None


async def _drive(
    pending: list[Task], executor: Executor, run: RunDir, progress: Progress,
    effective: dict[str, Any], options: BatchOptions, this_run: dict[str, Any],
    clock: dict[str, float],
) -> None:
    send, receive = anyio.create_memory_object_stream[Task](max(len(pending), 1))
    for task in pending:
        send.send_nowait(task)
    send.close()
    tasks_root = run.path / "tasks"

    async def worker_loop(queue: Any) -> None:
        async with queue:
            async for task in queue:
                job = {"task": task.to_dict(), "model": effective["model"],
                       "max_turns": effective["max_turns"], "toolsets": effective["toolsets"],
                       "timeout": effective["task_timeout"],
                       "environment": effective.get("environment"),
                       "task_dir": str((tasks_root / task_dir_name(task.id)).resolve()),
                       "keep": options.keep_workspaces, "session_id": uuid.uuid4().hex,
                       "checkpoints": False if options.no_checkpoints else None}
                record = await executor.run(job)
                mark = time.perf_counter()
                this_run["tasks_run"] += 1
                this_run["wall_s"] = round(time.monotonic() - clock["started"], 3)
                run.append(trajectory_line(record))  # writes the checkpoint, `runs` with it
                this_run["bookkeeping_ms"] = round(
                    this_run["bookkeeping_ms"] + (time.perf_counter() - mark) * 1000, 3)
                progress.task_done(failed=record.get("status") != "completed")

    if not pending:
        receive.close()
        return
    async with executor, anyio.create_task_group() as outer:
        outer.start_soon(_tick, progress)
        async with anyio.create_task_group() as tg:
            for _ in range(min(options.workers, len(pending))):
                tg.start_soon(worker_loop, receive.clone())
            receive.close()
        outer.cancel_scope.cancel()
    with contextlib.suppress(OSError):
        tasks_root.rmdir()  # empty unless --keep-workspaces or a task is left mid-way


async def _tick(progress: Progress) -> None:
    """Redraw now and then, so rate and ETA move while long tasks run."""
    while True:
        await anyio.sleep(1)
        progress.draw()
