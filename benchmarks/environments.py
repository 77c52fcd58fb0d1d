"""Execution environment benchmarks, on a real podman (a local image) and a real sshd.

    env_command_overhead   median wall time of `terminal`-level `true` through the workspace
                           on local, docker (podman exec'd helper) and ssh (control master,
                           loopback), and the overhead over local. Targets: docker <= 60 ms,
                           ssh <= 30 ms.
    env_container_start    from a new session's first tool call to its answer: a fresh
                           container (<= 1.5 s), then a persistent one's second session (its
                           stopped container started again; <= 0.5 s).
    env_batch              20 batch tasks, each in its own container (a replayed model writes
                           a file, runs a command in the container, reads back), 4 workers:
                           failures caused by the environment (<= 5 %) and containers left (0).
    env_cancel             a command cancelled as it forks (`sleep 60 & sleep 60`, just after
                           it wrote its pid) on local, docker and ssh: cancel -> the command's
                           end known (locally: its whole group gone; there: the helper's status,
                           sent once the shell and what holds its output ended). Median, p95.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio

from benchmarks import env_image, env_sshd
from talaria.agent.tool_runner import invoke
from talaria.tools.builtin import load_builtin_tools
from talaria.tools.context import ToolContext
from talaria.tools.environments.base import EnvWorkspace, open_environment
from talaria.tools.environments.spec import resolve
from talaria.tools.local.workspace import LocalWorkspace
from talaria.tools.state import ToolState

T = TypeVar("T")

RUNS = 40
BATCH_TASKS = 20
BATCH_WORKERS = 4


def _workspace(name: str, tables: dict[str, Any], project: Path, session: str) -> EnvWorkspace:
    spec = resolve(name, tables)
    return EnvWorkspace(LocalWorkspace(project), open_environment(
        spec, cwd=project, session_id=session, home=project.parent / "home"))


async def _median_run(ws: EnvWorkspace, project: Path) -> float:
    await ws.run("true", cwd=project, timeout=30, output_limit=1000)  # started, warm
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        await ws.run("true", cwd=project, timeout=30, output_limit=1000)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def _measure_each(tag: str, measure: Callable[[EnvWorkspace, Path], Awaitable[T]]
                  ) -> Iterator[tuple[str, T]]:
    """`measure(workspace, project)` on local, docker (the test image) and ssh (a throwaway
    sshd), each in a workspace of its own over one project: (name, result) in that order."""
    image = env_image.ensure_image()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        project = root / "project"
        project.mkdir()
        with env_sshd.Sshd(root / "sshd") as server:
            tables = {"docker": {"image": image}, "ssh": server.table(workdir=root / "remote")}
            for name in ("local", "docker", "ssh"):
                ws = _workspace(name, tables, project, f"{tag}-{name}")
                try:
                    result = anyio.run(measure, ws, project)
                finally:
                    ws.close()
                yield name, result


def env_command_overhead() -> Iterator[dict[str, Any]]:
    why = env_image.missing() or env_sshd.missing()
    if why:
        yield {"metric": "skipped", "why": why}
        return
    medians = dict(_measure_each("bench", _median_run))
    for name, target in (("docker", 60.0), ("ssh", 30.0)):
        overhead = medians[name] - medians["local"]
        yield {"metric": f"{name}_command_overhead_ms", "median_ms": round(medians[name], 2),
               "local_median_ms": round(medians["local"], 2), "overhead_ms": round(overhead, 2),
               "target_ms": target, "ok": overhead <= target, "runs": RUNS}


SECOND_STARTS = 7
"""Second starts timed (the spread on a shared machine is wide: 0.5 to 3 s)."""


async def _first_command(ws: EnvWorkspace, project: Path) -> float:
    started = time.perf_counter()
    await ws.run("true", cwd=project, timeout=60, output_limit=1000)
    return time.perf_counter() - started


def env_container_start() -> Iterator[dict[str, Any]]:
    why = env_image.missing()
    if why:
        yield {"metric": "skipped", "why": why}
        return
    image = env_image.ensure_image()
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        fresh = []
        for i in range(3):
            ws = _workspace(f"docker:{image}", {}, project, f"bench-start-{i}")
            try:
                fresh.append(anyio.run(_first_command, ws, project))
            finally:
                ws.close()
        tables = {"docker": {"image": image, "persistent": True}}
        first = _workspace("docker", tables, project, "bench-p1")
        try:
            cold = anyio.run(_first_command, first, project)
        finally:
            first.close()
        again = []
        for i in range(SECOND_STARTS):
            ws = _workspace("docker", tables, project, f"bench-p{i + 2}")
            try:
                again.append(anyio.run(_first_command, ws, project))
            finally:
                ws.close()
        name = first.env.name  # type: ignore[attr-defined]
        subprocess.run(["podman", "rm", "-f", name], capture_output=True)
        subprocess.run(["podman", "volume", "rm", "-f", first.env.volume], capture_output=True)  # type: ignore[attr-defined]
    yield {"metric": "container_start_to_first_command_s", "median_s": round(statistics.median(fresh), 3),
           "runs_s": [round(t, 3) for t in fresh], "target_s": 1.5,
           "ok": statistics.median(fresh) <= 1.5}
    yield {"metric": "persistent_second_start_s", "median_s": round(statistics.median(again), 3),
           "runs_s": [round(t, 3) for t in again], "first_start_s": round(cold, 3),
           "target_s": 0.5, "ok": statistics.median(again) <= 0.5}


SCENARIO = {"turns": [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "a task"}}]},
    {"tool_calls": [{"name": "terminal", "arguments": {"command": "cat out.txt && test -f /proc/1/cmdline"}}]},
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "out.txt"}}]},
    {"text": "Done in the container."},
]}


def env_batch() -> Iterator[dict[str, Any]]:
    why = env_image.missing()
    if why:
        yield {"metric": "skipped", "why": why}
        return
    from talaria.agent.trajectories.batch.runner import BatchOptions, run_batch

    image = env_image.ensure_image()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        scenario = root / "scenario.json"
        scenario.write_text(json.dumps(SCENARIO))
        tasks = root / "tasks.jsonl"
        tasks.write_text("".join(json.dumps({"id": f"t{i}", "prompt": f"task {i}",
                                             "environment": f"docker:{image}"}) + "\n"
                                 for i in range(BATCH_TASKS)))
        started = time.perf_counter()
        result = run_batch(BatchOptions(tasks_file=tasks, run_name="envs", output_dir=root / "data",
                                        workers=BATCH_WORKERS, model=f"replay:{scenario}"),
                           progress_out=None)
        wall = time.perf_counter() - started
        records = [json.loads(line) for line in
                   (result.run_dir / "trajectories.jsonl").read_text().splitlines()]
    env_failures = [r for r in records if not r.get("completed")]
    left = subprocess.run(["podman", "ps", "-a", "--filter", "label=talaria.environment",
                           "--format", "{{.Names}}"], capture_output=True, text=True).stdout.split()
    yield {"metric": "batch_in_containers", "tasks": BATCH_TASKS, "workers": BATCH_WORKERS,
           "completed": result.completed, "failed": result.failed,
           "failure_share": round(len(env_failures) / BATCH_TASKS, 3), "target_share": 0.05,
           "containers_left": len(left), "wall_s": round(wall, 2),
           "ok": len(env_failures) / BATCH_TASKS <= 0.05 and not left}


CANCEL_RUNS = 20


async def _cancel_once(ws: EnvWorkspace, project: Path, state: ToolState) -> float:
    """Seconds from the cancel to the `terminal` call returning, cancelled just after the
    shell wrote its pid (the project has the same absolute path locally, in the container and
    on the loopback SSH host), as it forks `sleep 60 &`. Through the tool, as a turn runs
    it: the session's shell state makes bash fork the last command too."""
    terminal = load_builtin_tools().get("terminal")
    assert terminal is not None
    mark = project / "pgid"
    mark.unlink(missing_ok=True)
    args = {"command": f"echo $$ > {mark}; sleep 60 & sleep 60"}
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(invoke, terminal, args, ToolContext(workspace=ws, state=state))
            with anyio.fail_after(60):
                while not mark.exists() or not mark.read_text().strip():
                    await anyio.sleep(0.002)
            started = time.perf_counter()
            scope.cancel()
    return time.perf_counter() - started


async def _cancels(ws: EnvWorkspace, project: Path) -> list[float]:
    await ws.run("true", cwd=project, timeout=60, output_limit=1000)  # started, warm
    state = ToolState()
    return [await _cancel_once(ws, project, state) for _ in range(CANCEL_RUNS)]


def env_cancel() -> Iterator[dict[str, Any]]:
    why = env_image.missing() or env_sshd.missing()
    if why:
        yield {"metric": "skipped", "why": why}
        return
    for name, samples in _measure_each("bench-cancel", _cancels):
        yield {"metric": f"{name}_command_cancel_ms",
               "median_ms": round(statistics.median(samples) * 1e3, 1),
               "p95_ms": round(statistics.quantiles(samples, n=20)[18] * 1e3, 1),
               "max_ms": round(max(samples) * 1e3, 1), "runs": CANCEL_RUNS}


BENCHMARKS = {"env_command_overhead": env_command_overhead,
              "env_container_start": env_container_start, "env_batch": env_batch,
              "env_cancel": env_cancel}
