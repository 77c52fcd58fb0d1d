"""Compaction benchmarks: what stage 1 removes and keeps, and the time compaction spends
outside the model call on a 200K-token session.

    stage1_reduction                   tokens before/after stage 1, the verbatim tail
    stage1_keeps_verbatim              planted facts still present word for word after stage 1
                                       (deterministic: stage 1 never edits user or assistant
                                       text; facts inside tool outputs survive only where the
                                       one-line summary quotes them). No figure is given for
                                       stage 2: what a summary keeps depends on the model.
    compaction_time_outside_model_ms   stage 1 alone and full compaction (stage 1 + a stage-2
                                       summary that returns at once), medians in ms:
                                       `counted` = the session's messages were counted as they
                                       arrived, as the agent loop does before every model call
                                       (the normal case); `cold` = nothing counted before.
                                       `session_*` adds what /compact does around it: the real
                                       compact_session with a SQLite store (snapshot + event).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio

from benchmarks.synthetic import FACTS, facts_kept, tool_heavy_session
from talaria.agent.context import tokens
from talaria.agent.context.compaction import compact, compact_session, cuts
from talaria.agent.context.stage1 import stage1

WINDOW = 200_000
SESSION_TOKENS = 200_000
RUNS = 7
TARGET_MS = 50


class InstantSummarizer:
    """Returns a fixed summary at once: the benchmark times everything but the model."""

    async def summarize(self, instructions: str, transcript: str) -> str:
        return "## Goal\nfix refunds\n## Open work\n- continue"


def _median_ms(samples: list[float]) -> float:
    return round(sorted(samples)[len(samples) // 2] * 1000, 1)


def compaction() -> Iterator[dict[str, Any]]:
    session = tool_heavy_session(SESSION_TOKENS)
    before = tokens.count_messages(session)
    head, _, tail = cuts(session, WINDOW)
    reduced = stage1(session, head, tail)
    after = tokens.count_messages(reduced)
    tail_identical = json.dumps(reduced[tail:]) == json.dumps(session[tail:])
    yield {"metric": "stage1_reduction", "before_tokens": before, "after_tokens": after,
           "removed_share": round(1 - after / before, 3), "target_removed_share": 0.6,
           "protected_tail_messages": len(session) - tail, "tail_byte_identical": tail_identical}
    kept = facts_kept(reduced)
    yield {"metric": "stage1_keeps_verbatim", "planted_facts": len(FACTS), "kept": len(kept),
           "lost": sorted({f for _, f in FACTS} - set(kept)),
           "note": "deterministic text check of stage 1 only; not a summary-quality figure"}

    timings = anyio.run(_time_compact, session)
    with tempfile.TemporaryDirectory() as tmp:
        timings |= anyio.run(_time_sessions, session, Path(tmp))
    yield {"metric": "compaction_time_outside_model_ms", "session_tokens": before,
           **{name: _median_ms(samples) for name, samples in timings.items()},
           "target": TARGET_MS, "runs": RUNS}


async def _time_compact(session: list[dict[str, Any]]) -> dict[str, list[float]]:
    """compact() alone, timed inside one event loop (no loop start-up in the figures)."""
    timings: dict[str, list[float]] = {}
    for cache in ("counted", "cold"):
        for stage, force in (("stage1", False), ("full", True)):
            samples = timings.setdefault(f"{stage}_{cache}", [])
            for _ in range(RUNS):
                tokens.clear_cache()
                if cache == "counted":
                    count_as_the_loop_does(session)
                started = time.perf_counter()
                await compact(session, window=WINDOW, tools=[], summarizer=InstantSummarizer(),
                              force_summary=force)
                samples.append(time.perf_counter() - started)
    return timings


def count_as_the_loop_does(messages: list[dict[str, Any]]) -> None:
    """Size the context once per model call, as `agent/loop.py` does before each one."""
    start = 0
    for end, message in enumerate(messages, 1):
        if message.get("role") == "assistant":
            tokens.count_messages(messages[start:end])
            start = end
    tokens.count_messages(messages[start:])


def stored_session(messages: list[dict[str, Any]], root: Path) -> tuple[Any, Any]:
    """(session, store): a real session with a SQLite store under `root`, `messages` after
    the first (the system prompt) committed to its transcript as the loop would have."""
    from talaria.agent.config import load_config
    from talaria.agent.door import LocalDoor
    from talaria.agent.providers.factory import create_retrying_provider
    from talaria.agent.runtime import Opening, new_session
    from talaria.agent.store import Store
    from talaria.tools.local.workspace import LocalWorkspace

    env = {"TALARIA_HOME": str(root), "OPENAI_API_KEY": "sk-bench"}
    config = load_config({"model": "openai:bench"}, env=env)
    provider = create_retrying_provider("openai:bench", [], env=env)  # never called
    store = Store(root / "sessions.db")
    session = new_session(config, Opening(root, mode="bypass"), door=LocalDoor(LocalWorkspace(root)),
                          provider=provider, store=store)
    for message in messages[1:]:
        store.append(session.id, message)
    return session, store


async def _time_sessions(messages: list[dict[str, Any]], root: Path) -> dict[str, list[float]]:
    """The real compact_session (as /compact runs it) on a session with a SQLite store."""
    timings: dict[str, list[float]] = {"session_stage1_counted": [], "session_full_counted": []}
    session, store = stored_session(messages, root)
    session.context_window = WINDOW
    original = [*session.messages, *messages[1:]]
    session.summarizer = InstantSummarizer()
    for stage, force in (("stage1", False), ("full", True)):
        for _ in range(RUNS):
            session.context.replace(original)
            tokens.clear_cache()
            count_as_the_loop_does(original)
            tokens.count_messages([], session.tool_definitions())
            started = time.perf_counter()
            await compact_session(session, force_summary=force)
            timings[f"session_{stage}_counted"].append(time.perf_counter() - started)
    store.close()
    return timings


BENCHMARKS = {"compaction": compaction}
