"""Run one batch task: its own workspace, session and tools; returns its record.

    execute_sync(job, template=None) -> record (see records.py)

JOB = {"task": Task.to_dict(), "model", "max_turns", "toolsets", "timeout", "keep": bool,
"task_dir", "home", "session_id", "checkpoints": False | None (None: as configured),
"attempt": int, "agent": "talaria" | "oracle" | "nop", "max_cost": dollars | None,
"skills": a set's name | "none" | None, "skill_set": the set's folder | None,
"toolset_arm"?: the `--toolset-mix` arm drawn (its tools are "toolsets")}. `task_dir/workspace` is the task's working directory: a
fresh copy of its template, or empty; it is wiped first, so a task re-run after a crash starts
clean. `home` is the worker's TALARIA_HOME under the run directory: its `sessions.db` holds
each task's transcript as it happens, under the `session_id` the runner chose, so a worker
that dies mid-task still leaves its partial trajectory. Without `task_dir`/`home` (a Ray worker
on another machine) temp directories are used, and `template` carries the workspace as tar bytes.

Tasks run on one event loop that lives as long as the process (a daemon thread), so the SDK
client of each model is built once per worker, not once per task (~80 ms of TLS setup each).
`serve` is a local worker's main loop (see executors.LocalExecutor).
"""

from __future__ import annotations

import copy
import io
import os
import queue
import shutil
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread

from talaria.agent.trajectories.batch.records import make_record
from talaria.agent.trajectories.batch.sdk import warm_models

DEFAULT_TIMEOUT_S = 1800.0
"""Wall time allowed per task (--task-timeout)."""
TASK_ENV = "batch-task"
"""The environment table a task's own container settings go in (see `_environment`)."""

_providers: dict[tuple[Any, ...], Any] = {}
_hosts: dict[Path, Any] = {}
_temp_home: Path | None = None
_portal: anyio.from_thread.BlockingPortal | None = None
_portal_lock = threading.Lock()


def resolve_tools(toolsets: list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """Tool names for `toolsets` (toolset or tool names; "all"); None: the core tools.
    Raises ValueError naming an unknown one."""
    from talaria.tools.builtin import CORE_TOOLS, load_builtin_tools

    if not toolsets:
        return CORE_TOOLS
    specs = load_builtin_tools().select()
    names: dict[str, None] = {}
    for wanted in toolsets:
        matched = [s.name for s in specs if wanted in ("all", s.toolset, s.name)]
        if not matched:
            known = sorted({s.toolset for s in specs} | {s.name for s in specs})
            raise ValueError(f"unknown toolset {wanted!r}; known: {', '.join(known)}")
        names.update(dict.fromkeys(matched))
    return tuple(names)


def prepare(job: dict[str, Any], template: bytes | None) -> tuple[Path, Path]:
    """(task directory, working directory) on a clean slate."""
    task = job["task"]
    root = Path(job["task_dir"]) if job.get("task_dir") else Path(
        tempfile.mkdtemp(prefix=f"talaria-batch-{task['id'][:24]}-"))
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    if task.get("cwd"):
        return root, Path(task["cwd"])
    workspace = root / "workspace"
    source = task.get("source") or {}
    if source.get("format") == "swebench":
        from talaria.agent.trajectories.batch.swebench import checkout

        checkout(source, workspace)
    elif template is not None:
        workspace.mkdir()
        with tarfile.open(fileobj=io.BytesIO(template)) as tar:
            tar.extractall(workspace, filter="data")
    elif task.get("workspace"):
        shutil.copytree(task["workspace"], workspace, symlinks=True)
    else:
        workspace.mkdir()
    return root, workspace


def pack_template(directory: str) -> bytes:
    """A template directory as tar bytes, for workers that cannot see this disk."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(directory, arcname=".")
    return buffer.getvalue()


def _provider(config: Any, model: str | None) -> Any:
    """A fresh RetryingProvider per task over SDK clients kept for the worker's life.
    `copy.copy` shares the (stateless) inner providers but not the fallback position, so one
    task falling back does not send the next one straight to the fallback."""
    from talaria.agent.runtime import make_provider

    key = (model or config.model, config.fallback_models)
    if str(key[0]).startswith("replay:"):  # a recording is played once per task, from its start
        return make_provider(config, model)
    if key not in _providers:
        _providers[key] = make_provider(config, model)
    return copy.copy(_providers[key])


def worker_home(job: dict[str, Any]) -> Path:
    global _temp_home
    if job.get("home"):
        return Path(job["home"])
    if _temp_home is None:  # a Ray worker: one temp home per process
        _temp_home = Path(tempfile.mkdtemp(prefix="talaria-batch-home-"))
    return _temp_home


class BatchDoors:
    """The host's `Doors` for batch tasks: the task's directory on disk, events to the task's
    cost watch (`--max-cost`), questions refused (tasks run in bypass: nobody is asked)."""

    def __init__(self) -> None:
        self.watches: dict[str, Any] = {}
        """session id -> its attempt.CostWatch, set before the session opens."""

    def workspace(self, session_id: str, cwd: Path, roots: tuple[Path, ...]) -> Any:
        from talaria.tools.local.workspace import LocalWorkspace

        return LocalWorkspace(cwd, roots)

    def door(self, session_id: str, workspace: Any) -> Any:
        from talaria.agent.door import LocalDoor

        watch = self.watches.get(session_id)
        return LocalDoor(workspace, on_event=watch.on_event) if watch else LocalDoor(workspace)


def _host(config: Any) -> Any:
    """The worker's session host for `config.home`: one store per worker home, no review
    (a review's model calls and skill writes would leak into measured, parallel tasks)."""
    from talaria.agent.host import SessionHost

    if config.home not in _hosts:
        _hosts[config.home] = SessionHost(config, BatchDoors(), editor=False, review=False,
                                          prestart=False)
    return _hosts[config.home]


SKILL_TOOLS = ("skills_list", "skill_view", "skill_manage")
READ_SKILLS = ("skills_list", "skill_view")


def with_skills(job: dict[str, Any], tools: tuple[str, ...], config: Any) -> tuple[tuple[str, ...], Any]:
    """The task's tools and config under `--skills`: a set is read (never written: a measured
    run must not change what it measures) as the whole library; `none` takes every skill tool
    away. Raises FileNotFoundError when the set is not on this machine (a Ray node elsewhere)."""
    skills = job.get("skills")
    if skills is None:
        return tools, config
    kept = tuple(name for name in tools if name not in SKILL_TOOLS)
    if skills == "none":
        return kept, config
    folder = Path(str(job.get("skill_set")))
    if not folder.is_dir():
        raise FileNotFoundError(f"skill set {skills!r} is not at {folder} on this machine")
    return (*kept, *READ_SKILLS), replace(config, skill_set=folder)


def _environment(config: Any, task: dict[str, Any], job: dict[str, Any]) -> tuple[Any, str | None]:
    """(config, environment name) for the task: a Harbor task's resources (cpus, memory,
    network) become the settings of its container."""
    name = task.get("environment") or job.get("environment")
    resources = (task.get("source") or {}).get("resources")
    if not resources or not name or name.partition(":")[0] != "docker":
        return config, name
    table = {**config.environments.get("docker", {}), "backend": "docker", **resources}
    if image := name.partition(":")[2]:
        table["image"] = image
    return replace(config, environments={**config.environments, TASK_ENV: table}), TASK_ENV


async def execute(job: dict[str, Any], template: bytes | None = None) -> dict[str, Any]:
    """Run the job's task to its end, then its check; every outcome is a record, none raises."""
    from talaria.agent.config import load_config
    from talaria.agent.runtime import new_session_id
    from talaria.agent.trajectories.batch.attempt import CostWatch, run_attempt
    from talaria.agent.trajectories.batch.controls import ControlProvider

    task = job["task"]
    started = time.monotonic()
    status, reason, error, verdict = "failed", "setup_error", None, None
    model = task.get("model") or job.get("model")
    agent = job.get("agent") or "talaria"
    job["timeout"] = float(task.get("timeout") or job.get("timeout") or DEFAULT_TIMEOUT_S)
    host = session = root = config = None
    session_id = job.get("session_id") or new_session_id()
    try:
        root, cwd = prepare(job, template)
        home = worker_home(job)
        config = replace(load_config({"model": model, "max_turns": job.get("max_turns"),
                                      "checkpoints": job.get("checkpoints")}), home=home)
        tool_names, config = with_skills(job, resolve_tools(task.get("toolsets") or job.get("toolsets")),
                                         config)
        host = _host(config)
        watch = host.doors.watches[session_id] = CostWatch(job.get("max_cost"), config.prices)
        provider = ControlProvider(agent) if agent != "talaria" else _provider(config, model or config.model)
        config, environment = _environment(config, task, job)
        # Each task gets its own computer (a container per task): started by the host before
        # the first model call, torn down with the session below, so a failed task leaves
        # nothing behind.
        session = await host.open(cwd, mode="bypass", tool_names=tool_names, session_id=session_id,
                                  environment=environment, provider=provider, config=config)
        model = watch.model = session.provider.name
        if agent == "talaria":
            if (prime := getattr(session.checkpoints, "prime", None)) is not None:
                prime()  # git hashes the workspace while the SDK loads, not in the first checkpoint
            # The SDK import belongs to set-up, not to the first model call's time (model_s).
            warm_models([model])
        result = await run_attempt(host, session, job, cwd, watch)
        status, reason, error, verdict = result.status, result.reason, result.error, result.verdict
    except TimeoutError:
        reason, error = "timeout", f"no result after {job['timeout']:g}s"
    except Exception as exc:  # a task's bug must not take the worker (and the batch) down
        reason, error = _failure(exc, opened=session is not None)
    finally:
        messages: list[dict[str, Any]] = []
        if host is not None:
            host.doors.watches.pop(session_id, None)
            if session is not None:
                close_session(host, session)
                messages = _transcript(host.store, session.id)
        if root is not None and not job.get("keep"):
            shutil.rmtree(root, ignore_errors=True)
    return make_record(task, status=status, reason=reason, error=error, messages=messages,
                       model=model, duration_s=time.monotonic() - started, job=job,
                       verdict=verdict, prices=config.prices if config is not None else None)


def _failure(exc: Exception, *, opened: bool) -> tuple[str, str]:
    """(reason, error) of a task that could not start (or, `opened`, broke after)."""
    from talaria.agent.host import ModelFailure
    from talaria.tools.errors import EnvError

    if isinstance(exc, ModelFailure):
        return "provider_error", exc.message
    if isinstance(exc, EnvError):  # a bad environment name or table, or it could not start
        return "environment_error", str(exc)
    return "error" if opened else "setup_error", f"{type(exc).__name__}: {exc}"


def _transcript(store: Any, session_id: str) -> list[dict[str, Any]]:
    return [m for m in store.messages(session_id) if m.get("role") != "event"]


def close_session(host: Any, session: Any) -> None:
    """Close the task's session (`Session.close`: the `execute_code` kernel, the container):
    a worker process runs many tasks, and a kernel left behind would outlive its task."""
    try:
        session.prompts.clear()
        session.close()
        host.sessions.pop(session.id, None)
    except Exception as exc:  # cleanup is best effort; the record is what matters
        print(f"talaria batch: closing session {session.id}: {exc}", file=sys.stderr)


def partial_messages(home: Path, session_id: str) -> list[dict[str, Any]]:
    """The transcript a dead worker left for `session_id` in its store (empty if none)."""
    from talaria.agent.store import Store

    path = home / "sessions.db"
    if not path.exists():
        return []
    store = Store(path)
    try:
        return _transcript(store, session_id)
    finally:
        store.close()


def _loop() -> anyio.from_thread.BlockingPortal:
    """The process's event loop (started on first use), reachable from any thread."""
    global _portal
    with _portal_lock:
        if _portal is None:
            ready = threading.Event()

            async def serve() -> None:
                global _portal
                async with anyio.from_thread.BlockingPortal() as portal:
                    _portal = portal
                    ready.set()
                    await portal.sleep_until_stopped()

            # A daemon thread: it must never keep the process alive at exit.
            threading.Thread(target=anyio.run, args=(serve,), daemon=True,
                             name="batch-loop").start()
            ready.wait()
    assert _portal is not None
    return _portal


def execute_sync(job: dict[str, Any], template: bytes | None = None) -> dict[str, Any]:
    return _loop().call(execute, job, template)


def serve(conn: Any, env: dict[str, str], log_path: str | None) -> None:
    """A local worker (forked by LocalExecutor): jobs in, records out over `conn`, until the
    runner closes its end. When the pipe closes while a job runs, the runner is gone (even
    `kill -9`): the worker exits at once rather than finish work nobody will record."""
    os.environ.clear()
    os.environ.update(env)
    if log_path:
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    jobs: queue.Queue[dict[str, Any] | None] = queue.Queue()
    busy = threading.Event()

    def read() -> None:
        try:
            while True:
                jobs.put(conn.recv())
        except (EOFError, OSError):
            pass
        if busy.is_set() or not jobs.empty():
            os._exit(1)
        jobs.put(None)

    threading.Thread(target=read, daemon=True, name="batch-jobs").start()
    while (job := jobs.get()) is not None:
        busy.set()
        record = execute_sync(job)
        try:
            conn.send(record)
        except OSError:
            os._exit(1)
        busy.clear()
    os._exit(0)  # skip interpreter teardown: the loop thread, kernels already closed
