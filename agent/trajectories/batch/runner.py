"""The batch runner: many tasks, each in its own workspace, up to `workers` at a time.

    result = run_batch(BatchOptions(tasks_file=Path("tasks.jsonl"), run_name="r1", workers=8))

Output in `output_dir/run_name/` (see checkpoint.py): `trajectories.jsonl` (one line per finished
task), `checkpoint.json`, `statistics.json`, `attempts.jsonl` (failed lines replaced by
`--retry-failed`), `logs/` (worker output, when there is any) and, while a run lasts,
`tasks/<id>/workspace` and `homes/worker-N/` (each local worker's TALARIA_HOME).
Only this process writes results; executors return records. With `resume`, finished attempts
are skipped by (task id, attempt); options not given again are taken from the run's
checkpoint; `statistics.json` covers every invocation (see stats.py). `attempts` runs each
task that many times, the first attempt of every task before any second one; a `--resume`
with more attempts runs only the new ones. `tasks_file` may be a JSONL tasks file, a
directory of Harbor tasks (harbor.py), or SWE-bench instances with `repos` (swebench.py).
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio

from talaria.agent.trajectories.batch.checkpoint import (
    STATISTICS,
    RunDir,
    previous_options,
    write_json_atomic,
)
from talaria.agent.trajectories.batch.controls import AGENTS
from talaria.agent.trajectories.batch.datasets import load_dataset
from talaria.agent.trajectories.batch.executors import Executor, LocalExecutor
from talaria.agent.trajectories.batch.jobs import (
    check_prices,
    job_for,
    prepare_environments,
    task_dir_name,  # noqa: F401 - the runner's name for it (tests, tools)
)
from talaria.agent.trajectories.batch.mix import DEFAULT_SEED, Mix, mix_summary, parse_mix
from talaria.agent.trajectories.batch.progress import Progress
from talaria.agent.trajectories.batch.ray_executor import RayExecutor
from talaria.agent.trajectories.batch.records import trajectory_line
from talaria.agent.trajectories.batch.stats import compute
from talaria.agent.trajectories.batch.tasks import TaskFileError
from talaria.agent.trajectories.batch.worker import DEFAULT_TIMEOUT_S, resolve_tools
from talaria.tools.skills.sets import NONE, contents, require_set

MAX_WORKERS = 256
MAX_ATTEMPTS = 1000
RESUMABLE = ("model", "max_turns", "toolsets", "task_timeout", "executor", "address",
             "environment", "agent", "attempts", "max_cost", "repos", "skills",
             "toolset_mix", "seed")
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
    """Take no checkpoints of task workspaces (`--no-checkpoints`). They are taken only
    with `keep_workspaces`: otherwise they would go with the worker homes at the end."""
    agent: str | None = None
    """"talaria" (the default), or a control: "oracle" (each task's solution), "nop" (nothing)."""
    attempts: int | None = None
    """Runs of each task (default 1), each in a fresh workspace."""
    max_cost: float | None = None
    """Dollars one attempt may spend on model calls before its turn is stopped (`cost_limit`)."""
    repos: Path | None = None
    """Local clones or mirrors of the repositories SWE-bench instances name."""
    skills: str | None = None
    """A skill set (`$TALARIA_HOME/skill-sets/NAME`) every task reads, read-only, as its whole
    skill library; "none": no skills at all; None: as before (the toolsets decide)."""
    toolset_mix: str | None = None
    """Toolsets drawn per task, e.g. "core=0.5,core-execute_code=0.5" (mix.py)."""
    seed: int | None = None
    """The toolset mix's seed (default mix.DEFAULT_SEED, recorded in the run)."""


@dataclass(frozen=True, slots=True)
class BatchResult:
    run_dir: Path
    total: int
    ran: int
    completed: int
    failed: int
    statistics: dict[str, Any] = field(repr=False)


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
    if options.toolset_mix is not None:
        parse_mix(options.toolset_mix)
    if options.agent not in (None, *AGENTS):
        raise ValueError(f"--agent {options.agent!r}: choose {', '.join(AGENTS)}")
    if options.attempts is not None and not 1 <= options.attempts <= MAX_ATTEMPTS:
        raise ValueError(f"--attempts must be between 1 and {MAX_ATTEMPTS}")
    if options.max_cost is not None and not options.max_cost > 0:
        raise ValueError("--max-cost must be a positive number of dollars")
    if options.repos is not None and not options.repos.is_dir():
        raise ValueError(f"--repos {options.repos}: not a directory (give the directory that "
                         "holds the repositories' clones)")


def _effective(options: BatchOptions, previous: dict[str, Any]) -> dict[str, Any]:
    values = {name: getattr(options, name) for name in RESUMABLE}
    for name in RESUMABLE:
        if values[name] is None and previous.get(name) is not None:
            values[name] = previous[name]
    values["executor"] = values["executor"] or "local"
    values["agent"] = values["agent"] or "talaria"
    values["attempts"] = int(values["attempts"] or 1)
    values["task_timeout"] = float(values["task_timeout"] or DEFAULT_TIMEOUT_S)
    if values["repos"] is not None:
        values["repos"] = str(values["repos"])
    if values["toolsets"] is not None:
        values["toolsets"] = list(values["toolsets"])
    return values


def toolset_mix(effective: dict[str, Any], previous: dict[str, Any]) -> Mix | None:
    """The run's toolset mix (None without one), its seed settled in `effective`. ValueError
    for a mix with --toolsets, a --seed without a mix, and a resume that would change the mix
    or its seed (the tasks already run drew their toolsets from them)."""
    spec = effective["toolset_mix"]
    if spec is not None and effective["toolsets"] is not None:
        raise ValueError("--toolset-mix and --toolsets cannot be combined: put the toolsets "
                         "in the mix's arms")
    if spec is None and effective["seed"] is not None:
        raise ValueError("--seed seeds --toolset-mix: give a mix, or leave --seed out")
    mix = parse_mix(spec) if spec is not None else None
    if mix is not None:
        effective["toolset_mix"] = mix.spec
        effective["seed"] = int(effective["seed"] if effective["seed"] is not None else DEFAULT_SEED)
    if previous and (previous.get("toolset_mix"), previous.get("seed")) != (
            effective["toolset_mix"], effective["seed"]):
        was = (f"--toolset-mix {previous['toolset_mix']!r} --seed {previous.get('seed')}"
               if previous.get("toolset_mix") else "no --toolset-mix")
        raise ValueError(f"this run was started with {was}: resume it with the same, or choose "
                         "another --run-name (its tasks drew their toolsets from it)")
    return mix


def make_executor(
    kind: str, *, workers: int, address: str | None, run_dir: Path, models: tuple[str, ...] = (),
    keep: bool = False,
) -> Executor:
    if kind == "ray":
        return RayExecutor(workers=workers, address=address)
    return LocalExecutor(workers, run_dir=run_dir, preload=models, keep_homes=keep)


def run_batch(
    options: BatchOptions, *, progress_out: TextIO | None = sys.stderr,
    executor: Executor | None = None,
) -> BatchResult:
    """Run the pending attempts of `options`. Raises TaskFileError, RunExistsError, ValueError."""
    check_options(options)
    run_dir = options.output_dir / options.run_name
    again = options.resume or options.retry_failed
    effective = _effective(options, previous_options(run_dir) if again else {})
    mix = toolset_mix(effective, previous_options(run_dir) if again else {})
    repos = Path(effective["repos"]) if effective["repos"] else None
    tasks = load_dataset(options.tasks_file, repos=repos)  # bad input: the run is not touched
    if not tasks:
        raise TaskFileError(f"{options.tasks_file}: no tasks (one JSON object per line, e.g. "
                            '{"prompt": "fix the failing test", "workspace": "project"})')
    check_prices(effective, tasks)
    effective["skill_set"] = skill_set_folder(effective["skills"])  # bad input: run untouched
    meta: dict[str, Any] = {"run_name": options.run_name,
                            "tasks_file": str(options.tasks_file.resolve()),
                            "total_tasks": len(tasks)}
    arms = {t.id: mix.choose(t.id, effective["seed"]) for t in tasks if not t.toolsets} if mix else {}
    if arms:
        meta["toolset_arms"] = {task_id: arm.label for task_id, arm in arms.items()}
    run = RunDir.open(run_dir, meta=meta, resume=again)
    try:
        run.meta["options"] = effective
        if effective["skill_set"]:  # what the set held when this invocation started
            run.meta["skill_set"] = {"name": effective["skills"], "path": effective["skill_set"],
                                     "skills": contents(Path(effective["skill_set"]))}
        keys = [(t, a) for a in range(1, effective["attempts"] + 1) for t in tasks]
        progress = Progress(len(keys), out=progress_out,
                            done=sum((t.id, a) in run.finished for t, a in keys),
                            failed=sum(run.finished.get((t.id, a)) == "failed" for t, a in keys))
        if options.retry_failed:
            pending = [(t, a) for t, a in keys if run.finished.get((t.id, a)) == "failed"]
            progress.retried(run.take_failed({(t.id, a) for t, a in pending}))
        else:
            pending = [(t, a) for t, a in keys if (t.id, a) not in run.finished]
        this_run: dict[str, Any] = {
            "started_at": round(time.time(), 3), "executor": effective["executor"],
            "workers": options.workers, "tasks_run": 0, "wall_s": 0.0, "bookkeeping_ms": 0.0,
            "resume": options.resume, "retry_failed": options.retry_failed}
        run.meta["runs"] = [*run.previous_runs, this_run]
        run.write_checkpoint()
        clock = {"started": time.monotonic()}
        try:
            places = prepare_environments(
                {t.id: t for t, _ in pending}, effective["environment"], progress_out)
            jobs = [job_for(task, attempt, places, effective, options, run_dir, arms.get(task.id))
                    for task, attempt in pending]
            default = effective["model"] or _configured_model()
            models = {m for t, _ in pending if (m := t.model or default)}
            executor = executor or make_executor(
                effective["executor"], workers=max(1, min(options.workers, len(pending))),
                address=effective["address"], run_dir=run_dir, models=tuple(sorted(models)),
                keep=options.keep_workspaces)
            anyio.run(_drive, jobs, executor, run, progress, options, this_run, clock)
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
            if mix:
                statistics["toolset_mix"] = mix_summary(mix, effective["seed"], arms)
            write_json_atomic(run_dir / STATISTICS, statistics)
    finally:
        run.close()
    tasks_stats = statistics["tasks"]
    return BatchResult(run_dir, len(keys), progress.ran, tasks_stats["completed"],
                       tasks_stats["failed"], statistics)


def skill_set_folder(skills: str | None) -> str | None:
    """The folder of the run's `--skills` set (None for `none` or no set); ValueError naming
    an unknown set and how to make one."""
    if skills in (None, NONE):
        return None
    from talaria.agent.config import load_config
    from talaria.tools.skills.store import SkillError

    try:
        return str(require_set(load_config().home, str(skills)))
    except SkillError as exc:
        raise ValueError(f"--skills {skills}: {exc} (or --skills none: no skills)") from None


def _configured_model() -> str | None:
    """The configured default model (for the SDK preload), or None when there is none."""
    from talaria.agent.config import load_config

    try:
        return load_config().model
    except ValueError:
        return None


async def _drive(
    jobs: list[dict[str, Any]], executor: Executor, run: RunDir, progress: Progress,
    options: BatchOptions, this_run: dict[str, Any], clock: dict[str, float],
) -> None:
    send, receive = anyio.create_memory_object_stream[dict[str, Any]](max(len(jobs), 1))
    for job in jobs:
        send.send_nowait(job)
    send.close()

    def record(line: dict[str, Any]) -> None:
        mark = time.perf_counter()
        this_run["tasks_run"] += 1
        this_run["wall_s"] = round(time.monotonic() - clock["started"], 3)
        run.append(trajectory_line(line))  # writes the checkpoint, `runs` with it
        this_run["bookkeeping_ms"] = round(
            this_run["bookkeeping_ms"] + (time.perf_counter() - mark) * 1000, 3)
        progress.task_done(failed=line.get("status") != "completed")

    async def worker_loop(queue: Any) -> None:
        async with queue:
            async for job in queue:
                # A task whose environment could not be made (an image build failed) is a
                # failed attempt at once: nothing to run it in.
                record(job["failed"] if "failed" in job else await executor.run(job))

    if not jobs:
        receive.close()
        return
    async with executor, anyio.create_task_group() as outer:
        outer.start_soon(_tick, progress)
        async with anyio.create_task_group() as tg:
            for _ in range(min(options.workers, len(jobs))):
                tg.start_soon(worker_loop, receive.clone())
            receive.close()
        outer.cancel_scope.cancel()
    with contextlib.suppress(OSError):
        (run.path / "tasks").rmdir()  # empty unless --keep-workspaces or a task is left mid-way


async def _tick(progress: Progress) -> None:
    """Redraw now and then, so rate and ETA move while long tasks run."""
    while True:
        await anyio.sleep(1)
        progress.draw()
