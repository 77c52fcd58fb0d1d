"""Batch tasks on Ray: long-lived Ray actors, each running a few tasks at a time.

    async with RayExecutor(workers=8, address="HEAD:6379") as ex:   record = await ex.run(job)

Each actor is a Ray worker process that imported the agent once, when it started (as the local
executor's forkserver does), and runs the same `worker.execute` for every job it is given, up
to `slots` at once on its event loop (`--workers` in all, at most one actor per CPU of the
cluster): a job is one actor call, so no task waits for Ray to lease it a worker, and a small
machine does not pay one agent import per job slot. The first actors go to the cluster's
nodes in turn, replacements where SPREAD finds room; actors take no CPU of Ray's accounting (`--workers` bounds how many tasks run, here): a
replacement always finds a place, even after a node is gone.

Workers need only the package: a task's workspace template travels as tar bytes through the
object store (once per template), and provider settings (OPENAI_*, ANTHROPIC_*, ...) as the
job's runtime environment. A task's `cwd`, a SWE-bench clone (`--repos`) and a Harbor task's
image must exist on the node that runs it.

`address`: an existing cluster (`HEAD:6379`, or `ray://HEAD:10001` through Ray Client);
without it a local instance is started for the run, advertised on 127.0.0.1 with no
dashboard, and stopped after it. When an actor dies (its node lost, its process killed) its
job runs again on a new actor, up to RAY_RETRIES times: the dead run produced no result, so
nothing is recorded twice; a task that keeps killing its worker is then `worker_crashed`.
A job past its deadline is `timeout`, and its actor is replaced.
"""

from __future__ import annotations

import contextlib
import os
import time
from functools import partial
from typing import Any

import anyio

from talaria.agent.trajectories.batch.executors import deadline, lost
from talaria.agent.trajectories.batch.worker import pack_template

RAY_RETRIES = 3
"""New actors a job gets after the one running it died."""
MAX_TEMPLATE_BYTES = 200 * 1024 * 1024
"""Largest packed workspace template shipped to Ray workers."""
ACTOR_START_TIMEOUT_S = 600.0
_PARKED: dict[int, list[Any]] = {}
"""Actors of finished runs on a Ray this process did not start, by slots: the next run uses
them (a dead one is found out when its first job is given to it, and replaced)."""
PROVIDER_ENV_PREFIXES = ("OPENAI_", "ANTHROPIC_", "OPENROUTER_", "TALARIA_")
PROVIDER_ENV_SUFFIXES = ("_API_KEY", "_BASE_URL", "_AUTH_TOKEN")
"""Variables a Ray cluster's workers get from the driver: model settings and keys (a custom
provider's `api_key_env` included), nothing else of this machine's environment."""


class BatchActor:
    """One worker slot on a Ray node (made a Ray actor class by `RayExecutor`)."""

    def __init__(self) -> None:
        import talaria.agent.trajectories.batch.warm  # noqa: F401 - paid once, at the start

    def node(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def run(self, job: dict[str, Any], template: bytes | None) -> dict[str, Any]:
        from talaria.agent.trajectories.batch.worker import execute_sync

        record = execute_sync(job, template)
        record["ray_node"] = self.node()
        return record


class RayExecutor:
    def __init__(self, *, workers: int, address: str | None = None) -> None:
        self.workers = workers
        self.address = address
        self.slots = 1
        """Jobs each actor runs at once (see `_size`)."""
        self._ray: Any = None
        self._actor_class: Any = None
        self._free: dict[Any, int] = {}
        """Live actor -> its free slots."""
        self._slots = anyio.Semaphore(workers)
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
                kwargs |= {"include_dashboard": False, "num_cpus": os.cpu_count() or 1,
                           "_node_ip_address": "127.0.0.1"}
            try:
                await anyio.to_thread.run_sync(lambda: ray.init(**kwargs))
            except Exception as exc:  # a bad address, a cluster of another Ray version
                where = self.address or "a local instance"
                raise ValueError(f"Ray: cannot start or reach {where}: {exc}") from exc
            self._started_here = True
        actors = self._size(int(ray.cluster_resources().get("CPU") or 1))
        # We replace dead actors ourselves (max_restarts=0): a restarted one would keep the
        # resources of a node that may be gone; SPREAD puts new ones on the nodes alive.
        remote: Any = ray.remote
        self._actor_class = remote(num_cpus=0, max_restarts=0, max_concurrency=self.slots,
                                   scheduling_strategy="SPREAD")(BatchActor)
        reused = await self._alive(_PARKED.pop(self.slots, [])) if not self._started_here else []
        nodes = sorted(n["NodeID"] for n in ray.nodes()
                       if n.get("Alive") and n.get("Resources", {}).get("CPU"))
        placed = [self._place(nodes, i).remote() for i in range(actors - len(reused))]
        try:  # every actor up (its imports done) before the first job: the start, counted once
            started = reused + await anyio.to_thread.run_sync(self._started, placed)
        except ray.exceptions.RayError as exc:
            raise ValueError(f"Ray: the batch's workers did not start: {exc}") from exc
        self._free = dict.fromkeys(started, self.slots)
        return self

    def _place(self, nodes: list[str], index: int) -> Any:
        """The `index`-th first actor, on `nodes` (those with CPUs) in turn: SPREAD alone may
        put them all on one node while another is still reporting in, and a soft affinity
        sent them all to one node of two in most tries (Ray 2.x, actors of no CPU). Hard, so
        an actor whose node went meanwhile fails to start and is replaced (`_started`)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if not nodes:
            return self._actor_class
        node = nodes[index % len(nodes)]
        return self._actor_class.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False))

    def _started(self, actors: list[Any]) -> list[Any]:
        """`actors` once each answers, one that cannot start on its node (gone) replaced by
        one placed anywhere (a worker thread: it waits for them)."""
        ray = self._ray
        pending = [(actor, actor.node.remote()) for actor in actors]
        out = []
        for actor, ref in pending:  # all asked at once: the wait is the slowest start
            try:
                ray.get(ref, timeout=ACTOR_START_TIMEOUT_S)
            except (ray.exceptions.ActorUnschedulableError, ray.exceptions.RayActorError):
                self._kill(actor)
                actor = self._actor_class.remote()
                ray.get(actor.node.remote(), timeout=ACTOR_START_TIMEOUT_S)
            out.append(actor)
        return out

    async def _alive(self, actors: list[Any]) -> list[Any]:
        """Those of `actors` that still answer (a parked one may have gone with its node)."""
        alive = []
        for actor in actors:
            try:
                await anyio.to_thread.run_sync(partial(self._ping, actor))
                alive.append(actor)
            except self._ray.exceptions.RayError:
                self._kill(actor)
        return alive

    def _ping(self, actor: Any) -> None:
        self._ray.get(actor.node.remote(), timeout=30)

    def _size(self, cpus: int) -> int:
        """Actors to start: one per CPU of the cluster at most, each running `slots` jobs, so
        `workers` jobs run at once. Each actor is a process that imports the agent (about a
        CPU-second): on a small machine a few actors with several jobs each (mostly waiting
        on the model) beat one process per job."""
        actors = max(1, min(self.workers, cpus))
        self.slots = -(-self.workers // actors)
        return actors

    async def __aexit__(self, *exc: object) -> None:
        if self._started_here:
            await anyio.to_thread.run_sync(self._ray.shutdown)
            return
        # Ray outlives this run (it was running before): the next run of this process on it
        # finds its workers started. They go with this process (they are its job's actors).
        idle = [a for a, free in self._free.items() if free == self.slots]
        for actor in set(self._free) - set(idle):
            self._kill(actor)
        _PARKED.setdefault(self.slots, []).extend(idle)

    def _kill(self, actor: Any) -> None:
        with contextlib.suppress(Exception):  # already gone with its node
            self._ray.kill(actor, no_restart=True)

    def _take(self) -> Any:
        """The live actor with the most free slots (one is free: the semaphore says so), of
        those the one unused longest: jobs that end before the next starts (a fast model, a
        busy driver) go round every actor and node, not always to the first."""
        actor = max(self._free, key=self._free.__getitem__)
        self._free[actor] = self._free.pop(actor) - 1  # to the end: last among equals
        return actor

    def _give_back(self, actor: Any) -> None:
        if actor in self._free:
            self._free[actor] += 1

    def _dead(self, actor: Any) -> None:
        """Replace a dead actor (once, whichever of its jobs notices first)."""
        if actor in self._free:
            del self._free[actor]
            self._kill(actor)
            self._free[self._actor_class.remote()] = self.slots

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
            return lost(job, "setup_error", str(exc), started)
        job = {**job, "task_dir": None, "home": None}  # temp dirs on the worker's machine
        errors = self._ray.exceptions
        why: Exception | None = None
        async with self._slots:
            for _ in range(RAY_RETRIES + 1):
                actor = self._take()
                ref = actor.run.remote(job, template)
                try:
                    record: dict[str, Any] = await anyio.to_thread.run_sync(
                        partial(self._ray.get, ref, timeout=deadline(job)), abandon_on_cancel=True)
                    self._give_back(actor)
                    return record
                except errors.GetTimeoutError:
                    self._dead(actor)  # the job may still hold it: a fresh one takes its place
                    return lost(job, "timeout", f"no result after {deadline(job):.0f}s", started)
                except errors.RayActorError as exc:  # its process or its node died
                    self._dead(actor)
                    why = exc
                except errors.RayError as exc:
                    self._give_back(actor)
                    return lost(job, "worker_crashed", f"{type(exc).__name__}: {exc}", started)
                except anyio.get_cancelled_exc_class():
                    self._dead(actor)
                    raise
            return lost(job, "worker_crashed", f"its Ray worker died {RAY_RETRIES + 1} "
                        f"times: {type(why).__name__}: {why}", started)
