"""Working with a running agent: parallel subagents, their cancel, a steer's cost, checkpoints.

    subagents_parallel   3 subagents x 5 scripted tool calls, 200 ms per model call, against
                         one alone: the delegate_task call's wall time (target: <= 1.5x)
    subagents_cancel     3 subagents each running a 30 s command: cancel to turn end, every
                         card ended, no process left (target: within 1 s)
    steer                the cost a steering note adds to the model call that takes it in
                         (SQLite transcript; target: <= 1 ms), and the check when none waits
    checkpoints          before-turn checkpoint of a 1,000-file project (target <= 150 ms;
                         cold: the first ever, warm: the usual case) and /undo of a 20-file
                         turn (target <= 200 ms)

Real sessions, tools, processes and git; the model is scripted in this process (a subagent's
brief names its story; `latency` stands for a model's time to first token).
"""

from __future__ import annotations

import re
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio

from benchmarks.execute_code import _group_alive, play
from talaria.agent.config import load_config
from talaria.agent.door import LocalDoor
from talaria.agent.runtime import Opening, new_session
from talaria.agent.session import Session
from talaria.tools.local.workspace import LocalWorkspace

LATENCY_S = 0.2
TOOL_CALLS = 5
RUNS = 3
GOAL = re.compile(r"goal:(\w+)")


class _Stories:
    """A scripted model in this process: the parent plays `script`; each subagent (its brief
    opens with "goal:NAME") plays `stories[NAME](tool results so far)`; each call waits
    `latency` first, as a model's time to first token."""

    name = "bench:stories"

    def __init__(self, script: list[dict[str, Any]], stories: dict[str, Any], latency: float) -> None:
        self.script, self.stories, self.latency = script, stories, latency

    async def warm(self) -> None:
        pass

    async def stream(self, messages: Any, tools: Any, **options: Any) -> AsyncIterator[Any]:
        user = next((m for m in messages if m.get("role") == "user"), None)
        goal = GOAL.search(str(user.get("content"))) if user else None
        if goal and goal.group(1) in self.stories:
            turn = self.stories[goal.group(1)](sum(1 for m in messages if m.get("role") == "tool"))
            await anyio.sleep(self.latency)
        else:
            turn = self.script.pop(0)
        for event in play(turn, f"call_{id(turn)}"):
            yield event


def _session(root: Path, provider: Any, events: list[Any], store: Any = None,
             **config: Any) -> Session:
    project = root / "project"
    project.mkdir(parents=True, exist_ok=True)

    async def record(event: Any) -> None:
        events.append((time.perf_counter(), event))

    return new_session(load_config(config, env={"TALARIA_HOME": str(root / "home")}),
                       Opening(project, mode="bypass"),
                       door=LocalDoor(LocalWorkspace(project), on_event=record), provider=provider,
                       store=store)


def _delegate(*names: str) -> dict[str, Any]:
    return {"calls": [("delegate_task", {"tasks": [{"goal": f"goal:{n} do it"} for n in names]})]}


def _story(name: str) -> Any:
    def turn(done: int) -> dict[str, Any]:
        if done < TOOL_CALLS:
            return {"calls": [("write_file", {"path": f"{name}-{done}.txt", "content": f"{name} {done}\n"})]}
        return {"text": f"{name}: wrote {TOOL_CALLS} files."}
    return turn


def _delegate_seconds(children: int) -> float:
    from talaria.agent.loop import run_turn

    names = [f"c{i}" for i in range(children)]
    events: list[Any] = []
    with tempfile.TemporaryDirectory() as tmp:
        model = _Stories([_delegate(*names), {"text": "done"}], {n: _story(n) for n in names},
                         LATENCY_S)
        session = _session(Path(tmp), model, events, checkpoints=False)
        anyio.run(run_turn, session, "split the work")
        session.close()
    delegate_id = next(e.id for _, e in events if type(e).__name__ == "ToolCallStarted"
                       and e.name == "delegate_task")
    started, finished = (at for at, e in events if type(e).__name__ in (
        "ToolCallStarted", "ToolCallFinished") and getattr(e, "id", "") == delegate_id)
    return finished - started


def subagents_parallel() -> Iterator[dict[str, Any]]:
    one = statistics.median(_delegate_seconds(1) for _ in range(RUNS))
    three = statistics.median(_delegate_seconds(3) for _ in range(RUNS))
    yield {"metric": "subagents_parallel_s", "one_child": round(one, 3),
           "three_children": round(three, 3), "ratio": round(three / one, 3), "target_ratio": 1.5,
           "model_latency_s": LATENCY_S, "tool_calls_per_child": TOOL_CALLS, "runs": RUNS}


def _cancel_once() -> tuple[float, bool]:
    """(seconds from cancel to the turn's end, every card ended and no process left)."""
    from talaria.agent.loop import run_turn

    events: list[Any] = []
    names = ("a", "b", "c")

    def sleeper(name: str) -> Any:
        return lambda done: {"calls": [("terminal", {"command": f"echo $$ > {name}.pid; sleep 30"})]}

    with tempfile.TemporaryDirectory() as tmp:
        model = _Stories([_delegate(*names)], {n: sleeper(n) for n in names}, 0.0)
        session = _session(Path(tmp), model, events, checkpoints=False)
        pids = {n: session.cwd / f"{n}.pid" for n in names}

        async def main() -> float:
            async with anyio.create_task_group() as tg:
                tg.start_soon(run_turn, session, "go")
                while not all(p.exists() and p.read_text().strip() for p in pids.values()):
                    await anyio.sleep(0.02)
                started = time.perf_counter()
                session.cancel()
            return time.perf_counter() - started

        took = anyio.run(main)
        ids = {kind: {e.id for _, e in events if type(e).__name__ == kind}
               for kind in ("ToolCallStarted", "ToolCallFinished")}
        clean = ids["ToolCallStarted"] == ids["ToolCallFinished"]
        clean &= not any(_group_alive(int(p.read_text())) for p in pids.values())
        session.close()
    return took, clean


def subagents_cancel() -> Iterator[dict[str, Any]]:
    runs = [_cancel_once() for _ in range(RUNS)]
    samples = [took for took, _ in runs]
    yield {"metric": "subagents_cancel_s", "median": round(statistics.median(samples), 3),
           "max": round(max(samples), 3), "target": 1.0,
           "cards_ended_no_process_left": all(clean for _, clean in runs), "runs": RUNS}


def steer() -> Iterator[dict[str, Any]]:
    from talaria.agent.loop import take_steering
    from talaria.agent.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "sessions.db")
        session = _session(Path(tmp), _Stories([], {}, 0.0), [], store=store, checkpoints=False)
        with_note, without = [], []
        for i in range(200):
            session.steer_notes.append(f"note {i}: prefer the existing helper")
            started = time.perf_counter()
            take_steering(session)
            with_note.append(time.perf_counter() - started)
            started = time.perf_counter()
            take_steering(session)
            without.append(time.perf_counter() - started)
        store.close()
    yield {"metric": "steer_cost_ms", "with_a_note_median": round(statistics.median(with_note) * 1e3, 4),
           "with_a_note_p95": round(statistics.quantiles(with_note, n=20)[18] * 1e3, 4),
           "no_note_median": round(statistics.median(without) * 1e3, 5), "target": 1.0,
           "note": "one user message appended and committed to sessions.db before the model call"}


def _project(root: Path, files: int) -> None:
    """A project whose files were saved a minute ago, not in the second its checkpoint index
    is written: git hashes "racily clean" files again at every snapshot, which no real
    project of 1,000 files has all at once."""
    import os

    written = time.time() - 60
    for i in range(files):
        folder = root / f"pkg{i % 25}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"mod{i}.py"
        path.write_text(f"VALUE = {i}\n" * 40)
        os.utime(path, (written, written))


async def _checkpointed_turn(checkpoints: Any, project: Path, number: int, edit: int) -> float:
    """A turn that writes `edit` files; returns its before-change checkpoint's seconds."""
    checkpoints.begin_turn(f"turn {number}")
    started = time.perf_counter()
    await checkpoints.before_change()
    took = time.perf_counter() - started
    for i in range(edit):
        path = project / f"pkg{i % 25}" / f"mod{i}.py"
        checkpoints.record_write(str(path), path.read_text())
        path.write_text(f"CHANGED = {number}\n")
    await checkpoints.end_turn()
    return took


def _checkpoint_run(run: int) -> tuple[float, float, float, float]:
    """(primed first turn, unprimed first ever, warm, undo of 20 files), in seconds."""
    from talaria.agent.checkpoints import TurnCheckpoints
    from talaria.agent.checkpoints.restore import undo
    from talaria.tools.local.workspace import LocalWorkspace

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        project, home = root / "project", root / "home"
        _project(project, 1000)
        fresh = TurnCheckpoints(home / "primed", project, f"primed{run}")
        fresh.prime().join()  # as a session's start does, in the background
        primed = anyio.run(_checkpointed_turn, fresh, project, 0, 0)
        checkpoints = TurnCheckpoints(home, project, f"bench{run}")
        cold = anyio.run(_checkpointed_turn, checkpoints, project, 1, 20)
        warm = anyio.run(_checkpointed_turn, checkpoints, project, 2, 20)
        started = time.perf_counter()
        reply = anyio.run(undo, checkpoints.repo, checkpoints.journal, f"bench{run}",
                          LocalWorkspace(project))
        took = time.perf_counter() - started
        assert reply.startswith("Restored 20 file(s)"), reply
    return primed, cold, warm, took


def checkpoints() -> Iterator[dict[str, Any]]:
    runs = [_checkpoint_run(run) for run in range(RUNS)]
    primed, cold, warm, undo = ([r[i] for r in runs] for i in range(4))
    yield {"metric": "checkpoint_before_turn_ms", "files": 1000,
           "warm_median": round(statistics.median(warm) * 1e3, 1),
           "first_turn_median": round(statistics.median(primed) * 1e3, 1),
           "unprimed_first_median": round(statistics.median(cold) * 1e3, 1), "target": 150,
           "runs": RUNS, "note": "warm: a project checkpointed before; first_turn: a session's "
           "first turn (the index was primed when the session started); unprimed_first: the "
           "very first checkpoint of a project with no priming"}
    yield {"metric": "undo_20_files_ms", "median": round(statistics.median(undo) * 1e3, 1),
           "max": round(max(undo) * 1e3, 1), "target": 200, "runs": RUNS}


BENCHMARKS = {"subagents_parallel": subagents_parallel, "subagents_cancel": subagents_cancel,
              "steer": steer, "checkpoints": checkpoints}
