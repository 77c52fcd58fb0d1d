"""Where batch tasks run: a pool of local worker processes, or a Ray cluster.

    async with LocalExecutor(8, run_dir=...) as ex:           record = await ex.run(job)
    async with RayExecutor(workers=8, address=None) as ex:    record = await ex.run(job)
                                                              (ray_executor.py)

Both return the task's record (see records.py) and never raise for a task's own failure: a
worker that dies mid-task (crash, OOM kill) or overruns its deadline becomes a failed record
(`worker_crashed`, `timeout`) with whatever transcript it left. The runner alone writes results,
so checkpoint and resume work the same on either executor. Ray is imported only by
ray_executor.py, and only when `RayExecutor` is entered.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import anyio

from talaria.agent.trajectories.batch.cpu import tree_load
from talaria.agent.trajectories.batch.records import make_record
from talaria.agent.trajectories.batch.sdk import sdk_modules
from talaria.agent.trajectories.batch.worker import DEFAULT_TIMEOUT_S, partial_messages

DEADLINE_GRACE_S = 30.0
"""A worker gets this long past the task timeout (its own clock) before it is killed."""


class Executor(Protocol):
    async def __aenter__(self) -> Executor: ...
    async def __aexit__(self, *exc: object) -> None: ...
    async def run(self, job: dict[str, Any]) -> dict[str, Any]: ...


def deadline(job: dict[str, Any]) -> float:
    """The agent's time, then its check's, then the grace."""
    return (float(job.get("timeout") or DEFAULT_TIMEOUT_S) + float(job.get("check_timeout") or 0)
            + DEADLINE_GRACE_S)


def lost(job: dict[str, Any], reason: str, error: str, started: float) -> dict[str, Any]:
    """The record of a task whose worker died or overran: what its store kept, if anything."""
    messages = []
    if job.get("home") and job.get("session_id"):
        messages = partial_messages(Path(job["home"]), job["session_id"])
    if job.get("task_dir") and not job.get("keep"):
        shutil.rmtree(job["task_dir"], ignore_errors=True)
    return make_record(job["task"], status="failed", reason=reason, error=error,
                       messages=messages, model=job["task"].get("model") or job.get("model"),
                       duration_s=time.monotonic() - started, job=job, prices=_prices())


def _prices() -> dict[str, Any]:
    """The configured prices, for the cost of a lost task's partial transcript."""
    from talaria.agent.config import load_config

    try:
        return load_config().prices
    except ValueError:
        return {}


GROW_AFTER_S = 0.1
"""How long a job waits for a busy worker before the pool may grow past one worker per core."""
BUSY_SHARE = 0.5
"""The share of the cores the workers (and their children) used over that wait past which
they are busy: no new worker."""


def _cores() -> int:
    """The CPUs this process may run on (macOS has no affinity: all of them)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


class _Worker:
    """One forked worker process (talaria.agent.trajectories.batch.worker.serve), one job at a time."""

    def __init__(self, process: Any, conn: Any, home: Path) -> None:
        self.process = process
        self.conn = conn
        self.home = home

    async def run(self, job: dict[str, Any]) -> dict[str, Any]:
        job["home"] = str(self.home)
        await anyio.to_thread.run_sync(self.conn.send, job)
        # A dead worker's end of the pipe closes: recv raises EOFError.
        return await anyio.to_thread.run_sync(self.conn.recv, abandon_on_cancel=True)

    async def stop(self, *, kill: bool) -> int | None:
        """Close the pipe (the worker exits after its job) or kill it; its exit code."""
        self.conn.close()
        if kill and self.process.exitcode is None:
            self.process.kill()
        await anyio.to_thread.run_sync(self.process.join, 5.0, abandon_on_cancel=True)
        if self.process.exitcode is None:
            self.process.kill()
            await anyio.to_thread.run_sync(self.process.join, abandon_on_cancel=True)
        return self.process.exitcode


class LocalExecutor:
    """Up to `workers` long-lived worker processes; a dead one is replaced before the next job.

    Workers are forked from a `forkserver` that imported the agent, the tools and the model
    SDKs once: starting 8 workers that each import them costs ~1 CPU-second apiece, which on a
    2-core machine is most of a 200-task run. The forkserver is a clean process (no threads
    of ours), and each worker gets this process's environment explicitly, as it is now.

    As many workers as cores start at once; past them, a worker is added only when a job has
    waited GROW_AFTER_S with every worker busy and the workers left the cores idle meanwhile
    (`cpu.py`). Jobs that wait on a model get every worker within that; jobs that keep the CPU
    busy (an instant model, tests run by a check) are run by the workers there are: more
    processes than cores would only take turns on them (8 workers on 2 cores were 5-15%
    slower than 2 with an instant model, issue 29).
    """

    def __init__(self, workers: int, *, run_dir: Path, preload: tuple[str, ...] = (),
                 keep_homes: bool = False) -> None:
        self.workers = workers
        self.keep_homes = keep_homes
        self.log_dir = run_dir / "logs"
        self.homes = run_dir / "homes"
        """Each worker's TALARIA_HOME (its sessions.db): `homes/worker-N`."""
        self.preload = preload
        """Models whose SDK the forkserver imports (only when it starts)."""
        self._idle: list[_Worker] = []
        self._all: list[_Worker] = []
        self._slots = anyio.Semaphore(workers)
        self._freed = anyio.Event()
        """Set when a worker goes back to idle (then replaced by a new one)."""
        self._looked: tuple[float, float] | None = None
        """(when, the workers' CPU seconds) at the last look (`_cores_left_idle`)."""
        self._spawned = 0
        self._context: Any = None
        self.at_once = min(workers, _cores())
        """Workers started with the executor and spawned without waiting: one per core."""

    async def __aenter__(self) -> LocalExecutor:
        import multiprocessing

        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload([*sdk_modules(self.preload), "talaria.agent.trajectories.batch.warm",
                                             "talaria.agent.trajectories.batch.worker"])
        async with anyio.create_task_group() as tg:
            for _ in range(self.at_once):
                tg.start_soon(self._add_idle)
        self._cores_left_idle()  # the first look: the first wait can decide
        return self

    async def __aexit__(self, *exc: object) -> None:
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for worker in self._all:
                    tg.start_soon(partial(worker.stop, kill=False))
        for log in self.log_dir.glob("worker-*.log"):
            if log.stat().st_size == 0:
                log.unlink()
        with contextlib.suppress(OSError):
            self.log_dir.rmdir()
        if not self.keep_homes:  # every transcript is in trajectories.jsonl by now
            shutil.rmtree(self.homes, ignore_errors=True)

    async def _add_idle(self) -> None:
        self._idle.append(await self._spawn())

    async def _spawn(self) -> _Worker:
        from talaria.agent.trajectories.batch.worker import serve

        self._spawned += 1
        home = self.homes / f"worker-{self._spawned}"
        home.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = str(self.log_dir / f"worker-{self._spawned}.log")
        ours, theirs = self._context.Pipe()
        process = self._context.Process(target=serve, args=(theirs, dict(os.environ), log),
                                        name=f"talaria-batch-{self._spawned}")
        await anyio.to_thread.run_sync(process.start)
        theirs.close()  # only the worker holds its end now: its death is our EOF
        worker = _Worker(process, ours, home)
        self._all.append(worker)
        return worker

    async def _worker(self) -> _Worker:
        """An idle worker, or a new one: at once up to `at_once` workers; past them, once a
        job has waited GROW_AFTER_S for a free one while the workers left the cores idle."""
        if not self._idle and len(self._all) < self.at_once:
            return await self._spawn()
        while not self._idle:
            with anyio.move_on_after(GROW_AFTER_S):
                while not self._idle:
                    await self._freed.wait()
            if not self._idle and self._cores_left_idle():
                return await self._spawn()
        return self._idle.pop()

    def _cores_left_idle(self) -> bool:
        """Whether the workers and their children used under BUSY_SHARE of their cores since
        the last look (at least GROW_AFTER_S / 2 before: one look per wait, however many jobs
        wait) and have fewer threads than that runnable now (`cpu.py`); the first look
        decides nothing. Without /proc: True."""
        now = time.monotonic()
        last = self._looked
        if last is not None and now - last[0] < GROW_AFTER_S / 2:
            return False
        load = tree_load({w.process.pid for w in self._all})
        if load is None:
            return True
        self._looked = (now, load.cpu_s)
        busy = BUSY_SHARE * min(self.at_once, len(self._all))
        return (last is not None and load.runnable < busy
                and load.cpu_s - last[1] < busy * (now - last[0]))

    def _free(self, worker: _Worker) -> None:
        self._idle.append(worker)
        self._freed.set()
        self._freed = anyio.Event()

    async def run(self, job: dict[str, Any]) -> dict[str, Any]:
        async with self._slots:
            worker = await self._worker()
            started = time.monotonic()
            try:
                with anyio.move_on_after(deadline(job)) as scope:
                    record = await worker.run(job)
            except (EOFError, OSError) as exc:
                self._all.remove(worker)
                code = await worker.stop(kill=True)
                why = f"signal {signal.Signals(-code).name}" if code and code < 0 else f"exit {code}"
                return lost(job, "worker_crashed", f"worker process died ({why}): {exc!r}", started)
            if scope.cancelled_caught:
                self._all.remove(worker)
                await worker.stop(kill=True)
                return lost(job, "timeout", f"worker killed after {deadline(job):.0f}s", started)
            self._free(worker)
            return record
