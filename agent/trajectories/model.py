"""The trajectory model: a session's transcript plus its metadata, cost and outcome.

A trajectory is *completed* when its last assistant message asks for no tools and was not
interrupted; anything else (cancelled, out of turns, crashed mid-tool) is *partial*. Loading
(from the store, a transcript file, a batch's ShareGPT lines) is in `load`; exports in `export/`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from talaria.agent.transcript import (
    CallUsage,
    Message,
    calls_of,
    is_answer,
    is_assistant,
    is_event,
    is_tool_result,
    last_assistant,
)

USAGE_KEYS = tuple(CallUsage.__annotations__)


class TrajectoryNotFound(LookupError):
    """No session with that id in the store, or no readable transcript at that path."""


@dataclass(frozen=True, slots=True)
class TurnUsage:
    """One model call: the assistant message at `index` of `Trajectory.messages`."""

    index: int
    model: str | None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    duration_ms: float | None = None


@dataclass(frozen=True, slots=True)
class Trajectory:
    session_id: str
    messages: tuple[Message, ...]
    """The transcript without event rows, the rows of `agent/transcript.py`."""
    times: tuple[float | None, ...]
    """Unix time each message was recorded (None when the source does not say)."""
    turns: tuple[TurnUsage, ...]
    tool_stats: dict[str, dict[str, int]]
    """{tool: {count, success, failure}} for the tools this trajectory called."""
    compactions: tuple[dict[str, Any], ...]
    """Compaction event rows, each with `at`: the index of the message that followed it."""
    status: str
    """`completed` or `partial`."""
    model: str | None = None
    cwd: str | None = None
    title: str | None = None
    mode: str | None = None
    created_at: float | None = None
    updated_at: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    reviews: tuple[dict[str, Any], ...] = ()
    """Background review event rows (their own model calls in `messages`, `changes`, `model`),
    each with `at` like a compaction; their calls are not the session's `turns`."""

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    @property
    def api_calls(self) -> int:
        return len(self.turns)

    def totals(self) -> dict[str, int]:
        """Token counts summed over every model call (or, for a ShareGPT line, whose turns
        carry none, the totals the line recorded)."""
        totals = {key: sum(getattr(t, key) for t in self.turns) for key in USAGE_KEYS}
        recorded = self.extra.get("usage")
        if not any(totals.values()) and isinstance(recorded, dict):
            return {key: int(recorded.get(key) or 0) for key in USAGE_KEYS}
        return totals

    def duration_ms(self) -> float:
        return round(sum(t.duration_ms or 0.0 for t in self.turns), 1)

def build(
    rows: list[Message], times: list[float | None] | None, *, session_id: str,
    model: str | None = None, **meta: Any,
) -> Trajectory:
    """A Trajectory from transcript rows (event rows included) and their record times."""
    times = list(times) if times is not None else [None] * len(rows)
    messages: list[Message] = []
    message_times: list[float | None] = []
    compactions: list[dict[str, Any]] = []
    reviews: list[dict[str, Any]] = []
    for row, when in zip(rows, times, strict=True):
        if is_event(row):
            if row.get("type") == "compaction":
                compactions.append({**row, "at": len(messages), "time": when})
            elif row.get("type") == "review":
                reviews.append({**row, "at": len(messages), "time": when})
            continue
        messages.append(row)
        message_times.append(when)
    turns = tuple(
        _turn(i, m) for i, m in enumerate(messages) if is_assistant(m)
    )
    if model is None:
        model = next((t.model for t in reversed(turns) if t.model), None)
    return Trajectory(
        session_id=session_id, messages=tuple(messages), times=tuple(message_times),
        turns=turns, tool_stats=tool_stats(messages), compactions=tuple(compactions),
        status=completion_status(messages), model=model, reviews=tuple(reviews), **meta,
    )


def completion_status(messages: list[Message] | tuple[Message, ...]) -> str:
    last = last_assistant(messages)
    return "completed" if last is not None and is_answer(last) else "partial"


def tool_failed(message: Message) -> bool:
    """A tool result is a failure when its status says so or its JSON carries an error."""
    status = message.get("status")
    if status in ("completed", "failed"):
        return status == "failed"
    content = message.get("content")
    if isinstance(content, str):
        try:
            data = json.loads(content)
        except ValueError:
            return content.strip().lower().startswith("error")
        return isinstance(data, dict) and data.get("error") is not None
    return False


def tool_stats(messages: list[Message] | tuple[Message, ...]) -> dict[str, dict[str, int]]:
    """{tool: {count, success, failure}}: calls counted from the assistant messages, outcomes
    from their results (a call that never got a result counts in neither)."""
    stats: dict[str, dict[str, int]] = {}
    names: dict[str, str] = {}
    for message in messages:
        for call in calls_of(message):
            entry = stats.setdefault(call["name"], {"count": 0, "success": 0, "failure": 0})
            entry["count"] += 1
            names[call["id"]] = call["name"]
        if is_tool_result(message):
            name = names.pop(message.get("tool_call_id", ""), None)
            if name is not None:
                stats[name]["failure" if tool_failed(message) else "success"] += 1
    return stats


def iso_time(when: float | None) -> str | None:
    """ISO 8601 in UTC, e.g. 2025-10-11T10:30:00.123Z."""
    if when is None:
        return None
    stamp = datetime.fromtimestamp(when, tz=UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def parse_time(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def _turn(index: int, message: Message) -> TurnUsage:
    usage = message.get("usage") or {}
    counts = {key: int(usage.get(key) or 0) for key in USAGE_KEYS}
    return TurnUsage(index, message.get("model"), duration_ms=message.get("duration_ms"), **counts)
