"""Agent-core benchmarks: loop overhead per tool call (the prompt's size: benchmarks/prompt.py)."""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio

from talaria.agent.door import LocalDoor
from talaria.agent.permissions import Permissions
from talaria.agent.providers.base import Finish, ToolCallRequest
from talaria.agent.session import Session
from talaria.tools.local.workspace import LocalWorkspace
from talaria.tools.registry import ToolSpec


class InstantModel:
    """Calls the no-op tool `calls` times, one call per model turn, then stops."""

    name = "bench:instant"

    def __init__(self, calls: int) -> None:
        self.left = calls

    async def warm(self) -> None:
        pass

    async def stream(self, messages: Any, tools: Any, **options: Any) -> AsyncIterator[Any]:
        if self.left:
            self.left -= 1
            yield ToolCallRequest(f"c{self.left}", "noop", "{}")
            yield Finish("tool_calls")
        else:
            yield Finish("stop")


async def _noop(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return {"ok": True}


def loop_overhead(calls: int = 2000) -> Iterator[dict[str, Any]]:
    yield _loop_overhead(calls, persist=False)
    yield _loop_overhead(calls, persist=True)


def _loop_overhead(calls: int, *, persist: bool) -> dict[str, Any]:
    from talaria.agent.loop import run_turn
    from talaria.agent.store import Store

    spec = ToolSpec(name="noop", description="no-op", parameters={"type": "object"},
                    handler=_noop, kind="read", parallel_safe=True)
    samples: list[float] = []
    last = time.perf_counter()

    async def emit(event: Any) -> None:
        nonlocal last
        if type(event).__name__ == "ToolCallFinished":
            now = time.perf_counter()
            samples.append(now - last)
            last = now

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = Store(root / "sessions.db") if persist else None
        session = Session(
            id="bench", cwd=root, door=LocalDoor(LocalWorkspace(root), on_event=emit),
            provider=InstantModel(calls), tools=[spec],
            permissions=Permissions(roots=(root,), mode="bypass"), store=store,
            context_window=128_000, max_turns=calls + 1, max_tokens=None,
            compact_threshold=0.8, supports_images=False, reasoning_effort=None,
        )
        if store is not None:
            store.create_session(session.id, str(root), model="bench", mode="bypass")
        session.append({"role": "system", "content": "bench"})
        started = time.perf_counter()
        anyio.run(run_turn, session, "go")
        total = time.perf_counter() - started
        if store is not None:
            store.close()
    samples = samples[10:]  # warm-up
    return {"metric": "loop_overhead_per_tool_call_ms",
            "transcript": "sqlite (sessions.db, WAL)" if persist else "in memory", "median": round(statistics.median(samples) * 1e3, 4),
           "p95": round(statistics.quantiles(samples, n=20)[18] * 1e3, 4), "calls": calls,
           "total_s": round(total, 3), "target_median": 2.0,
           "note": "model call + tool dispatch + transcript append, instant model"}


BENCHMARKS = {"loop_overhead": loop_overhead}
