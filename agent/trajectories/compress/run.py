"""The compression pipeline: plan in worker processes, summarize concurrently, write in order.

At most `window` lines are in flight (planned, being summarized, or waiting for an earlier
line to be written), so memory stays bounded however large the input is.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from typing import Any, TextIO

import anyio

from talaria.agent.trajectories.compress.plan import (
    Plan,
    fallback_summary,
    summary_request,
    summary_turn,
)
from talaria.agent.trajectories.compress.worker import plan_line

log = logging.getLogger(__name__)


class Pipeline:
    def __init__(
        self, options: Any, summarizer: Any, count: Callable[[str], int], pool: Executor | None,
        out: TextIO, progress_out: TextIO | None,
    ) -> None:
        self.options = options
        self.summarizer = summarizer
        self.count = count
        self.pool = pool
        self.out = out
        self.progress_out = progress_out
        self.metrics: list[dict[str, Any]] = []
        self._done: dict[int, tuple[str, dict[str, Any]]] = {}
        self._next = 0
        window = max(32, options.concurrency * 2, options.workers * 4)
        self._window = anyio.Semaphore(window)
        self._summaries = anyio.Semaphore(options.concurrency)
        self._planners = anyio.CapacityLimiter(max(1, options.workers * 2))
        self._shown = time.monotonic()

    async def run(self, lines: Iterable[str]) -> None:
        async with anyio.create_task_group() as tg:
            for index, line in enumerate(lines):
                await self._window.acquire()
                tg.start_soon(self._one, index, line)
        self._progress(final=True)

    async def _plan(self, line: str) -> tuple[Plan | None, float]:
        if self.pool is None:
            return plan_line(line)
        future = self.pool.submit(plan_line, line)
        return await anyio.to_thread.run_sync(future.result, limiter=self._planners,
                                              abandon_on_cancel=True)

    async def _one(self, index: int, line: str) -> None:
        started = time.perf_counter()
        planned, count_s = await self._plan(line)
        metrics: dict[str, Any] = {"index": index}
        text = line if line.endswith("\n") else line + "\n"
        if planned is None:
            metrics["error"] = "not a ShareGPT trajectory: passed through"
        else:
            total = planned.total
            metrics |= {"original_tokens": total, "compressed_tokens": total,
                        "compression_ratio": 1.0, "original_turns": len(planned.turn_tokens),
                        "compressed_turns": len(planned.turn_tokens), "turns_removed": 0,
                        "span": None, "compressed": False,
                        "still_over_limit": not planned.reaches_target,
                        "summarization_errors": 0, "summary_fallback": False, "summary_s": 0.0}
            if planned.span is not None:
                text = await self._compress(line, planned, metrics)
        metrics["count_s"] = round(count_s, 4)
        metrics["total_s"] = round(time.perf_counter() - started, 4)
        self._done[index] = (text, metrics)
        self._flush()

    async def _compress(self, line: str, planned: Plan, metrics: dict[str, Any]) -> str:
        options = self.options
        entry = json.loads(line)
        conversation = entry["conversations"]
        start, end = planned.span  # type: ignore[misc]
        instructions, transcript = summary_request(conversation, (start, end),
                                                   options.summary_tokens)
        began = time.perf_counter()
        async with self._summaries:
            try:
                with anyio.fail_after(options.summary_timeout):
                    summary = await self.summarizer.summarize(instructions, transcript)
                if not summary or not summary.strip():
                    raise ValueError("the summary model returned nothing")
            except Exception as exc:  # any failure: a deterministic summary, never a lost line
                reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                if isinstance(exc, TimeoutError):
                    reason = f"timed out after {options.summary_timeout}s"
                log.warning("trajectory %d: summary failed (%s)", metrics["index"], reason)
                metrics |= {"summarization_errors": 1, "summary_fallback": True, "error": reason}
                summary = fallback_summary(conversation, (start, end), reason)
        metrics["summary_s"] = round(time.perf_counter() - began, 4)
        value = summary_turn(summary, options.summary_tokens, self.count)
        entry["conversations"] = [*conversation[:start], {"from": "human", "value": value},
                                  *conversation[end:]]
        after = planned.total - sum(planned.turn_tokens[start:end]) + self.count(value)
        turns = len(entry["conversations"])
        metrics |= {"compressed_tokens": after,
                    "compression_ratio": round(after / max(planned.total, 1), 4),
                    "compressed_turns": turns, "turns_removed": len(conversation) - turns,
                    "span": [start, end], "compressed": True,
                    "still_over_limit": after > options.target_tokens}
        return json.dumps(entry, ensure_ascii=False) + "\n"

    def _flush(self) -> None:
        while self._next in self._done:
            text, metrics = self._done.pop(self._next)
            self.out.write(text)
            self.metrics.append(metrics)
            self._next += 1
            self._window.release()
        self._progress()

    def _progress(self, *, final: bool = False) -> None:
        now = time.monotonic()
        if self.progress_out is None or (not final and now - self._shown < 5.0):
            return
        self._shown = now
        compressed = sum(bool(m.get("compressed")) for m in self.metrics)
        errors = sum(m.get("summarization_errors", 0) for m in self.metrics)
        print(f"compress: {len(self.metrics)} done, {compressed} compressed, {errors} summary "
              "errors", file=self.progress_out, flush=True)

    def aggregate(self, wall_s: float) -> dict[str, Any]:
        rows = [m for m in self.metrics if "original_tokens" in m]
        compressed = [m for m in rows if m["compressed"]]
        before = sum(m["original_tokens"] for m in rows)
        after = sum(m["compressed_tokens"] for m in rows)
        return {
            "trajectories": len(rows),
            "not_trajectories": len(self.metrics) - len(rows),
            "compressed": len(compressed),
            "skipped_under_target": sum(not m["compressed"] and not m["still_over_limit"]
                                        for m in rows),
            "still_over_limit": sum(m["still_over_limit"] for m in rows),
            "summarization_errors": sum(m["summarization_errors"] for m in rows),
            "fallback_summaries": sum(m["summary_fallback"] for m in rows),
            "original_tokens": before,
            "compressed_tokens": after,
            "compression_ratio": round(after / before, 4) if before else 1.0,
            "mean_compression_ratio": round(
                sum(m["compression_ratio"] for m in compressed) / len(compressed), 4)
            if compressed else 1.0,
            "turns_removed": sum(m["turns_removed"] for m in rows),
            "timings": {"wall_s": round(wall_s, 3),
                        "count_s": round(sum(m["count_s"] for m in self.metrics), 3),
                        "summary_s": round(sum(m["summary_s"] for m in rows), 3)},
        }
