"""Compaction benchmarks: stage-1 reduction, time outside the model call, task retention."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anyio

from benchmarks.synthetic import FACTS, TemplateSummarizer, facts_kept, tool_heavy_session
from talaria.agent.context import tokens
from talaria.agent.context.compaction import boundaries, compact
from talaria.agent.context.stage1 import stage1

WINDOW = 200_000


class InstantSummarizer:
    async def summarize(self, instructions: str, transcript: str) -> str:
        return "## Goal\nfix refunds\n## Open work\n- continue"


def _median_ms(samples: list[float]) -> float:
    return round(sorted(samples)[len(samples) // 2] * 1000, 1)


def compaction() -> Iterator[dict[str, Any]]:
    session = tool_heavy_session(200_000)
    before = tokens.count_messages(session)
    head, tail = boundaries(session, int(WINDOW * 0.2))
    reduced = stage1(session, head, tail)
    after = tokens.count_messages(reduced)
    tail_identical = json.dumps(reduced[tail:]) == json.dumps(session[tail:])
    yield {"metric": "stage1_reduction", "before_tokens": before, "after_tokens": after,
           "removed_share": round(1 - after / before, 3), "target_removed_share": 0.6,
           "protected_tail_messages": len(session) - tail, "tail_byte_identical": tail_identical}

    timings: dict[str, list[float]] = {"stage1": [], "stage2": []}
    for _ in range(5):
        for stage, force in (("stage1", False), ("stage2", True)):
            started = time.perf_counter()
            anyio.run(lambda f=force: compact(session, window=WINDOW, tools=[],
                                              summarizer=InstantSummarizer(), force_summary=f))
            timings[stage].append(time.perf_counter() - started)
    yield {"metric": "compaction_time_outside_model_ms", "stage1_median": _median_ms(timings["stage1"]),
           "stage2_median_instant_summarizer": _median_ms(timings["stage2"]), "target": 200,
           "session_tokens": before}

    summarizer = TemplateSummarizer()
    result = anyio.run(lambda: compact(session, window=WINDOW, tools=[], summarizer=summarizer,
                                       force_summary=True))
    stage1_kept = facts_kept(reduced)
    yield {"metric": "task_retention", "facts": len(FACTS),
           "kept_by_stage1": len(stage1_kept),
           "kept_after_stage2_template_summarizer": len(facts_kept(result.messages)),
           "after_tokens": result.after, "lost_by_stage1": sorted(set(f for _, f in FACTS) - set(stage1_kept)),
           "lost_after_stage2": sorted(set(f for _, f in FACTS) - set(facts_kept(result.messages)))}


BENCHMARKS = {"compaction": compaction}
