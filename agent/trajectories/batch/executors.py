"""Where batch tasks run: a pool of local worker processes, or a Ray cluster.

    async with LocalExecutor(8, run_dir=...) as ex:           record = await ex.run(job)
    async with RayExecutor(address=None) as ex:               record = await ex.run(job)

Both return the task's record (see records.py) and never raise for a task's own failure: a
worker that dies mid-task (crash, OOM kill) or overruns its deadline becomes a failed record
(`worker_crashed`, `timeout`) with whatever transcript it left. The runner alone writes results,
so checkpoint and resume work the same on either executor. Ray is imported only here, and only
when `RayExecutor` is entered.
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

from talaria.agent.trajectories.batch.records import make_record
from talaria.agent.trajectories.batch.sdk import sdk_modules
from talaria.agent.trajectories.batch.worker import (
    DEFAULT_TIMEOUT_S,
    pack_template,
    partial_messages,
)

DEADLINE_GRACE_S = 30.0
"""A worker gets this long past the task timeout (its own clock) before it is killed."""
MAX_TEMPLATE_BYTES = 200 * 1024 * 1024
"""Largest packed workspace template shipped to Ray workers."""
RAY_RETRIES = 3
"""Retries of a task whose Ray worker or node died before it reported (see RayExecutor)."""
PROVIDER_ENV_PREFIXES = ("OPENAI_", "ANTHROPIC_", "OPENROUTER_", "TALARIA_")
PROVIDER_ENV_SUFFIXES = ("_API_KEY", "_BASE_URL", "_AUTH_TOKEN")
"""Variables a Ray cluster's workers get from the driver: model settings and keys (a custom
provider's `api_key_env` included), nothing else of this machine's environment."""


class Executor(Protocol):
    async def __aenter__(self) -> Executor: ...
    async def __aexit__(self, *exc: object) -> None: ...
    async def run(self, job: dict[str, Any]) -> dict[str, Any]: ...


def _deadline(job: dict[str, Any]) -> float:
    """The agent's time, then its check's, then the grace."""
    return (float(job.get("timeout") or DEFAULT_TIMEOUT_S) + float(job.get("check_timeout") or 0)
            + DEADLINE_GRACE_S)


def _lost(job: dict[str, Any], reason: str, error: str, started: float) -> dict[str, Any]:
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
    """`workers` long-lived worker processes; a dead one is replaced before the next job.

    Workers are forked from a `forkserver` that imported the agent, the tools and the model
    SDKs once: starting 8 workers that each import them costs ~1 CPU-second apiece, which on a
    2-core machine is most of a 200-task run. The forkserver is a clean process (no threads
    of ours), and each worker gets this process's environment explicitly, as it is now.
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
        self._spawned = 0
        self._context: Any = None

    async def __aenter__(self) -> LocalExecutor:
        import multiprocessing

        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload([*sdk_modules(self.preload), "talaria.agent.trajectories.batch.warm",
                                             "talaria.agent.trajectories.batch.worker"])
        async with anyio.create_task_group() as tg:
            for _ in range(self.workers):
                tg.start_soon(self._add_idle)
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

    async def run(self, job: dict[str, Any]) -> dict[str, Any]:
        async with self._slots:
            worker = self._idle.pop() if self._idle else await self._spawn()
            started = time.monotonic()
            try:
                with anyio.move_on_after(_deadline(job)) as scope:
                    record = await worker.run(job)
            except (EOFError, OSError) as exc:
                self._all.remove(worker)
                code = await worker.stop(kill=True)
                why = f"signal {signal.Signals(-code).name}" if code and code < 0 else f"exit {code}"
                return _lost(job, "worker_crashed", f"worker process died ({why}): {exc!r}", started)
            if scope.cancelled_caught:
                self._all.remove(worker)
                await worker.stop(kill=True)
                return _lost(job, "timeout", f"worker killed after {_deadline(job):.0f}s", started)
            self._idle.append(worker)
            return record


def _ray_execute(job: dict[str, Any], template: bytes | None) -> dict[str, Any]:
    import ray

    from talaria.agent.trajectories.batch.worker import execute_sync

    record = execute_sync(job, template)
    record["ray_node"] = ray.get_runtime_context().get_node_id()
    return record


class RayExecutor:
    """Tasks as Ray remote calls: the same `execute` in a Ray worker, on any node.

    Workers need only the package: a task's workspace template travels as tar bytes through the
    object store (once per template), and provider settings (OPENAI_*, ANTHROPIC_*, ...) as the
    job's runtime environment. A task's `cwd`, a SWE-bench clone (`--repos`) and a Harbor
    task's image must exist on the worker's machine.

    `address`: an existing cluster (`HEAD:6379`, or `ray://HEAD:10001` through Ray Client);
    without it a local instance is started for the run, advertised on 127.0.0.1 with no
    dashboard, and stopped after it. A task whose worker or node dies (a node killed, a
    machine lost) runs again on another, up to RAY_RETRIES times (Ray's own retry of system
    failures: the dead attempt produced no result, so nothing is recorded twice); a task that
    keeps killing its worker is then recorded `worker_crashed`.
    """

    def __init__(self, *, address: str | None = None, num_cpus: int | None = None) -> None:
        self.address = address
        self.num_cpus = num_cpus
        self._ray: Any = None
        self._remote: Any = None
        self._templates: dict[str, Any] = {}
        self._started_here = False

    async def __aenter__(self) -> RayExecutor:
        import ray

        self._ray = ray
        if not ray.is_initialized():
            env = {k: v for k, v in os.environ.items()
                   if k.startswith(PROVIDER_ENV_PREFIXES) or k.endswith(PROVIDER_ENV_SUFFIXES)}
            kwargs: dict[str, Any] = {"runtime_env": {"env_vars": env}, "log_to_driver": False}
            if self.address:
                kwargs["address"] = self.address
            else:
                kwargs |= {"include_dashboard": False, "num_cpus": self.num_cpus,
                           "_node_ip_address": "127.0.0.1"}
            try:
                await anyio.to_thread.run_sync(lambda: ray.init(**kwargs))
            except Exception as exc:  # a bad address, a cluster of another Ray version
                where = self.address or "a local instance"
                raise ValueError(f"Ray: cannot start or reach {where}: {exc}") from exc
            self._started_here = True
        # System failures only (a dead worker or node): a task's own failure is its record.
        self._remote = ray.remote(num_cpus=1, max_retries=RAY_RETRIES)(_ray_execute)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._started_here:
            await anyio.to_thread.run_sync(self._ray.shutdown)

    def _template(self, directory: str | None) -> Any:
        if directory is None:
            return None
        if directory not in self._templates:
            data = pack_template(directory)
            if len(data) > MAX_TEMPLATE_BYTES:
                raise ValueError(f"workspace {directory} packs to {len(data)} bytes "
                                 f"(limit {MAX_TEMPLATE_BYTES})")
            self._templates[directory] = self._ray.put(data)
        return self._templates[directory]

    async def run(self, job: dict[str, Any]) -> dict[str, Any]:
        started = time.monotonic()
        try:
            template = self._template(job["task"].get("workspace"))
        except (OSError, ValueError) as exc:
            return _lost(job, "setup_error", str(exc), started)
        job = {**job, "task_dir": None, "home": None}  # temp dirs on the worker's machine
        ref = self._remote.remote(job, template)
        try:
            return await anyio.to_thread.run_sync(
                lambda: self._ray.get(ref, timeout=_deadline(job)), abandon_on_cancel=True)
        except self._ray.exceptions.GetTimeoutError:
            self._ray.cancel(ref, force=True)
            return _lost(job, "timeout", f"no result after {_deadline(job):.0f}s", started)
        except self._ray.exceptions.RayError as exc:
            return _lost(job, "worker_crashed", f"{type(exc).__name__}: {exc}", started)
        except anyio.get_cancelled_exc_class():
            self._ray.cancel(ref, force=True)
            raise
