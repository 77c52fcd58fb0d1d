"""Where to cut a ShareGPT trajectory, and what stands in for the cut (pure functions).

A conversation is `[{"from": "system" | "human" | "gpt" | "tool", "value": str}, ...]`; a gpt
turn holding `<tool_call>`s is answered by the `tool` turn(s) right after it. Protected: the
first system, human, gpt and tool turns and the last `protect_last` turns. The span replaced by
the summary lies between them, starts on a non-tool turn and ends before a non-tool turn (or at
the end), so no tool response ever loses its call. Among the spans that bring the trajectory
under the target, the one with the fewest turns wins (ties: fewer tokens, then earliest).
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SUMMARY_PREFIX = "[CONTEXT SUMMARY]: "
ROLES = ("system", "human", "gpt", "tool")
TURN_CHARS = 3_000
"""Each turn is cut to this many characters (head + tail) in the summary request."""
REQUEST_CHARS = 400_000
"""The whole summary request is cut to this (a summary model's context is finite too)."""
TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)

Counter = Callable[[str], int]


@dataclass(frozen=True, slots=True)
class Plan:
    """`turn_tokens` per turn; `span` the [start, end) to summarize, or None."""

    turn_tokens: list[int]
    span: tuple[int, int] | None
    under_target: bool
    reaches_target: bool
    """False when even the largest span leaves the trajectory over the target."""

    @property
    def total(self) -> int:
        return sum(self.turn_tokens)


def protected_bounds(conversation: list[dict[str, Any]], protect_last: int) -> tuple[int, int]:
    """(first turn after the protected head, first turn of the protected tail)."""
    n = len(conversation)
    tail = max(0, n - max(protect_last, 0))
    firsts: dict[str, int] = {}
    for i, turn in enumerate(conversation):
        firsts.setdefault(str(turn.get("from")), i)
    head = [i for role, i in firsts.items() if role in ROLES and i < tail]
    return (max(head) + 1 if head else 0), tail


def plan(
    conversation: list[dict[str, Any]], count: Counter, *, target: int, summary_tokens: int,
    protect_last: int,
) -> Plan:
    turn_tokens = [count(str(turn.get("value") or "")) for turn in conversation]
    total = sum(turn_tokens)
    if total <= target:
        return Plan(turn_tokens, None, True, True)
    lo, hi = protected_bounds(conversation, protect_last)
    n = len(conversation)

    def is_tool(i: int) -> bool:
        return i < n and conversation[i].get("from") == "tool"

    starts = [i for i in range(lo, hi) if not is_tool(i)]
    ends = [j for j in range(lo + 1, hi + 1) if not is_tool(j)]
    prefix = [0]
    for value in turn_tokens:
        prefix.append(prefix[-1] + value)
    # The summary turn costs at most `summary_tokens` (it is cut to fit), so the span must hold
    # the overshoot plus that much.
    need = total - target + summary_tokens
    end_sums = [prefix[j] for j in ends]
    best: tuple[int, int, int] | None = None  # (turns, tokens, start)
    best_span = None
    for s in starts:
        k = bisect.bisect_left(end_sums, prefix[s] + need)
        if k == len(ends):
            break  # later starts only have less ahead of them
        e = ends[k]
        key = (e - s, prefix[e] - prefix[s], s)
        if best is None or key < best:
            best, best_span = key, (s, e)
    if best_span is not None:
        return Plan(turn_tokens, best_span, False, True)
    # Nothing reaches the target: summarize the widest span, if that saves anything at all.
    valid = [(s, e) for s in starts[:1] for e in ends[-1:] if e > s]
    if valid and prefix[valid[0][1]] - prefix[valid[0][0]] > summary_tokens:
        return Plan(turn_tokens, valid[0], False, False)
    return Plan(turn_tokens, None, False, False)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    return f"{text[:head]}\n…[{len(text) - limit} characters omitted]…\n{text[-(limit - head):]}"


def summary_request(conversation: list[dict[str, Any]], span: tuple[int, int],
                    summary_tokens: int) -> tuple[str, str]:
    """(instructions, transcript) for the summary model."""
    start, end = span
    parts = [f"[Turn {i} - {str(conversation[i].get('from', '?')).upper()}]:\n"
             f"{_cut(str(conversation[i].get('value') or ''), TURN_CHARS)}"
             for i in range(start, end)]
    transcript = _cut("\n\n".join(parts), REQUEST_CHARS)
    instructions = (
        "Summarize the following turns of an agent's conversation. The summary replaces them "
        "in the conversation, so the rest must still make sense after it.\n"
        "Write in the same language as the turns. From a neutral point of view, state:\n"
        "1. what the assistant did (tool calls, commands, files read or changed);\n"
        "2. what it learned (results, errors, values, file names, outputs);\n"
        "3. the decisions it made and what is still open.\n"
        f"Be factual and concrete. At most about {summary_tokens} tokens. Write only the "
        "summary, no preamble."
    )
    return instructions, transcript


def tool_names(value: str) -> list[str]:
    names = []
    for body in TOOL_CALL.findall(value):
        try:
            call = json.loads(body)
        except ValueError:
            continue
        if isinstance(call, dict) and isinstance(call.get("name"), str):
            names.append(call["name"])
    return names


def fallback_summary(conversation: list[dict[str, Any]], span: tuple[int, int], reason: str) -> str:
    """A summary built from the turns themselves, for when the summary model fails."""
    start, end = span
    turns = conversation[start:end]
    calls: dict[str, int] = {}
    for turn in turns:
        if turn.get("from") == "gpt":
            for name in tool_names(str(turn.get("value") or "")):
                calls[name] = calls.get(name, 0) + 1
    asks = [str(t.get("value") or "")[:300] for t in turns if t.get("from") == "human"]
    said = [str(t.get("value") or "") for t in turns if t.get("from") == "gpt"]
    said = [TOOL_CALL.sub("", s).strip()[:300] for s in said]
    lines = [f"(fallback summary; the summary model failed: {reason[:200]})",
             f"Turns {start}-{end - 1} were removed: {len(turns)} turns, "
             f"{sum(calls.values())} tool calls, "
             f"{sum(t.get('from') == 'tool' for t in turns)} tool responses."]
    if calls:
        lines.append("Tools called: " + ", ".join(f"{n} x{c}" for n, c in calls.items()))
    lines += [f"User: {a}" for a in asks[:5]]
    lines += [f"Assistant: {s}" for s in said if s][-5:]
    return "\n".join(lines)


def summary_turn(text: str, budget: int, count: Counter) -> str:
    """`SUMMARY_PREFIX + text`, cut (at a word where possible) to at most `budget` tokens."""
    text = text.strip()
    if text.startswith(SUMMARY_PREFIX.strip()):
        text = text[len(SUMMARY_PREFIX.strip()):].strip()
    value = SUMMARY_PREFIX + text
    if count(value) <= budget:
        return value
    lo, hi = 0, len(text)  # longest prefix of `text` that fits, by bisection on characters
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(SUMMARY_PREFIX + text[:mid] + " …") <= budget:
            lo = mid
        else:
            hi = mid - 1
    cut = text[:lo]
    space = cut.rfind(" ")
    if space > lo * 0.8:
        cut = cut[:space]
    return SUMMARY_PREFIX + cut + " …"
