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

Real sessions, tools, processes and git; the fake LLM on loopback (its `latency`).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio

LATENCY_S = 0.2
TOOL_CALLS = 5
RUNS = 3


def _session(llm: Any, root: Path, **config: Any) -> Any:
    from tests.helpers import make_session

    return make_session(llm, root, **config)


def _story(name: str) -> Any:
    def turn(done: int) -> dict[str, Any]:
        if done < TOOL_CALLS:
            return {"tool_calls": [{"name": "write_file", "arguments": {
                "path": f"{name}-{done}.txt", "content": f"{name} {done}\n"}}]}
        return {"text": f"{name}: wrote {TOOL_CALLS} files."}
    return turn


def _respond(stories: dict[str, Any]) -> Any:
    from tests.agent.test_subagents import goal_of, tools_done

    def respond(body: dict[str, Any]) -> dict[str, Any] | None:
        goal = goal_of(body)
        return stories[goal](tools_done(body)) if goal in stories else None
    return respond


def _delegate_seconds(children: int) -> float:
    from talaria.agent.loop import run_turn
    from tests.agent.test_subagents import delegate
    from tests.fakellm import FakeLLM
    from tests.helpers import recorded

    names = [f"c{i}" for i in range(children)]
    with tempfile.TemporaryDirectory() as tmp, FakeLLM(latency=LATENCY_S) as llm:
        session = _session(llm, Path(tmp), checkpoints=False)
        llm.respond = _respond({n: _story(n) for n in names})
        llm.script([{**delegate(*names), "delay": 0}, {"text": "done", "delay": 0}])
        stamps: dict[str, float] = {}
        recorder = recorded(session)
        original = recorder.__call__

        async def timed(event: Any) -> None:
            if type(event).__name__ in ("ToolCallStarted", "ToolCallFinished") and \
                    getattr(event, "id", "") == "call_1_0":
                stamps[type(event).__name__] = time.perf_counter()
            await original(event)

        session.door.on_event = timed  # type: ignore[attr-defined]
        anyio.run(run_turn, session, "split the work")
        session.close()
    return stamps["ToolCallFinished"] - stamps["ToolCallStarted"]


def subagents_parallel() -> Iterator[dict[str, Any]]:
    one = statistics.median(_delegate_seconds(1) for _ in range(RUNS))
    three = statistics.median(_delegate_seconds(3) for _ in range(RUNS))
    yield {"metric": "subagents_parallel_s", "one_child": round(one, 3),
           "three_children": round(three, 3), "ratio": round(three / one, 3), "target_ratio": 1.5,
           "model_latency_s": LATENCY_S, "tool_calls_per_child": TOOL_CALLS, "runs": RUNS}


def _cancel_once() -> tuple[float, bool]:
    """(seconds from cancel to the turn's end, every card ended and no process left)."""
    from talaria.agent.loop import run_turn
    from tests.agent.test_subagents import delegate
    from tests.fakellm import FakeLLM
    from tests.helpers import group_alive, recorded

    with tempfile.TemporaryDirectory() as tmp, FakeLLM() as llm:
        session = _session(llm, Path(tmp), checkpoints=False)
        pids = {n: session.cwd / f"{n}.pid" for n in ("a", "b", "c")}
        llm.respond = _respond({n: (lambda d, n=n: {"tool_calls": [{"name": "terminal", "arguments": {
            "command": f"echo $$ > {n}.pid; sleep 30"}}]}) for n in pids})
        llm.script([delegate(*pids)])

        async def main() -> float:
            async with anyio.create_task_group() as tg:
                tg.start_soon(run_turn, session, "go")
                while not all(p.exists() and p.read_text().strip() for p in pids.values()):
                    await anyio.sleep(0.02)
                started = time.perf_counter()
                session.cancel()
            return time.perf_counter() - started

        took = anyio.run(main)
        events = recorded(session)
        clean = {e.id for e in events.of("ToolCallFinished")} == {
            e.id for e in events.of("ToolCallStarted")}
        clean &= not any(group_alive(int(p.read_text())) for p in pids.values())
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
    from tests.fakellm import FakeLLM

    with tempfile.TemporaryDirectory() as tmp, FakeLLM() as llm:
        store = Store(Path(tmp) / "sessions.db")
        session = _session(llm, Path(tmp), store=store, checkpoints=False)
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
