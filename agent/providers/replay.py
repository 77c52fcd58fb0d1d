"""Replay recorded assistant turns (`replay:PATH`): deterministic runs without a model.

PATH is a scenario, JSON `{"turns": [TURN, ...]}` or JSONL of TURNs:

    TURN = {"text"?: str, "deltas"?: [str] (explicit text chunks), "reasoning"?: str,
            "signature"?: str, "redacted_thinking"?: str,
            "tool_calls"?: [{"id"?: str, "name": str, "arguments": dict | str}],
            "finish"?: "stop" | "tool_calls" | "length" | "refusal",
            "usage"?: {"input_tokens", "output_tokens", "cache_read_tokens", ...},
            "expect"?: {"last_message_role"?: "user" | "tool",
                        "tool_result_contains"?: str, "user_contains"?: str}}

or a Talaria transcript: JSONL of internal messages (see `base.py`), whose assistant
messages are replayed. The fake LLM server in `tests/fakellm.py` plays the same TURNs.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from talaria.agent.providers.base import (
    Finish,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallRequest,
    ToolDef,
    Usage,
)
from talaria.agent.providers.errors import (
    ContextOverflowError,
    ProviderError,
    ReplayError,
    TimeoutError_,
)
from talaria.agent.providers.retry import classify_error
from talaria.agent.transcript import (
    AssistantExtras,
    Message,
    is_assistant,
    is_tool_result,
    is_user,
    text_of,
)

MAX_DELTAS = 8  # text is streamed in at most this many pieces


def load_turns(path: str | Path) -> list[dict[str, Any]]:
    """The TURNs recorded in a scenario (JSON or JSONL) or a transcript (JSONL of messages)."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = [json.loads(line) for line in text.splitlines() if line.strip()]
    if isinstance(data, dict):
        data = data.get("turns", [data])
    if any("role" in item for item in data):
        return [_turn_from_message(m) for m in data if is_assistant(m)]
    return list(data)


def split_text(text: str) -> list[str]:
    """`text` cut at word boundaries into a few pieces that join back to it exactly."""
    words = re.findall(r"\s*\S+\s*", text) or ([text] if text else [])
    size = -(-len(words) // MAX_DELTAS) if words else 1
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)]


def turn_tool_calls(turn: dict[str, Any], number: int) -> list[dict[str, str]]:
    """The turn's tool calls with ids (`call_<number>_<i>` when absent) and JSON arguments."""
    calls = []
    for i, call in enumerate(turn.get("tool_calls") or ()):
        arguments = call.get("arguments", {})
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        calls.append(
            {
                "id": call.get("id") or f"call_{number}_{i}",
                "name": call["name"],
                "arguments": arguments,
            }
        )
    return calls


def turn_usage(turn: dict[str, Any], prompt_chars: int = 0) -> Usage:
    """The recorded usage, or an estimate at about four characters a token."""
    if turn.get("usage"):
        return Usage(**turn["usage"])
    produced = len(turn.get("text") or "") + len(turn.get("reasoning") or "")
    produced += sum(len(c["arguments"]) for c in turn_tool_calls(turn, 0))
    return Usage(input_tokens=prompt_chars // 4, output_tokens=max(1, produced // 4))


def fault_error(fault: str | dict[str, Any], provider: str) -> ProviderError:
    """The error a scripted fault turn (`{"fault": ...}`, see tests/fakellm.py) stands for."""
    if fault == "context_overflow":
        return ContextOverflowError("prompt is too long (scripted fault)", provider=provider)
    if isinstance(fault, dict):
        status = fault.get("status")
        retry_after = fault.get("retry_after")
        headers = {"retry-after": str(retry_after)} if retry_after is not None else None
        message = fault.get("message") or f"scripted fault: HTTP {status}"
        return classify_error(
            status, message, code=fault.get("code"), headers=headers, provider=provider
        )
    return TimeoutError_(f"scripted fault: {fault}", provider=provider)


def turn_finish(turn: dict[str, Any]) -> str:
    return turn.get("finish") or ("tool_calls" if turn.get("tool_calls") else "stop")


class ReplayProvider:
    """Plays the recorded turns in order and fails loudly when the run diverges."""

    def __init__(self, path: str | Path, *, name: str | None = None) -> None:
        self.path = Path(path)
        self.name = name or f"replay:{path}"
        try:
            self.turns = load_turns(self.path)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            message = f"cannot read recording {self.path}: {exc}"
            raise ReplayError(message, provider=self.name) from exc
        self.played = 0
        self._last_calls: int | None = None  # tool calls of the last turn played, faults aside

    async def warm(self) -> None:
        return None  # nothing to load

    async def stream(
        self, messages: Sequence[Message], tools: list[ToolDef], *, max_tokens: int | None = None,
        reasoning_effort: str | None = None,
    ) -> AsyncIterator[StreamEvent]:
        if self.played >= len(self.turns):
            self._fail(f"recording exhausted after {len(self.turns)} turns")
        turn = self.turns[self.played]
        if "fault" in turn:
            self.played += 1
            raise fault_error(turn["fault"], self.name)
        self._check(turn, messages, tools)
        self.played += 1
        self._last_calls = len(turn.get("tool_calls") or ())
        for piece in split_text(turn.get("reasoning") or ""):
            yield ReasoningDelta(piece)
        for piece in turn.get("deltas") or split_text(turn.get("text") or ""):
            yield TextDelta(piece)
        for call in turn_tool_calls(turn, self.played):
            yield ToolCallRequest(call["id"], call["name"], call["arguments"])
        yield turn_usage(turn, sum(len(str(m.get("content") or "")) for m in messages))
        extras = AssistantExtras()
        if turn.get("thinking_blocks"):
            extras["thinking_blocks"] = turn["thinking_blocks"]
        yield Finish(turn_finish(turn), extras)

    def _check(self, turn: dict[str, Any], messages: Sequence[Message], tools: list[ToolDef]) -> None:
        number = self.played + 1
        offered = {t["name"] for t in tools}
        for call in turn.get("tool_calls") or ():
            if call["name"] not in offered:
                self._fail(f"turn {number} calls tool {call['name']!r}, not offered")
        trailing = 0
        while trailing < len(messages) and is_tool_result(messages[-1 - trailing]):
            trailing += 1
        if self._last_calls is not None and trailing != self._last_calls:
            self._fail(f"turn {number} expects {self._last_calls} tool results, got {trailing}")
        expect = turn.get("expect") or {}
        last_role = messages[-1]["role"] if messages else None
        if "last_message_role" in expect and last_role != expect["last_message_role"]:
            self._fail(f"turn {number} expects a {expect['last_message_role']} message last")
        results = [text_of(m, sep="") for m in messages[len(messages) - trailing :]]
        if "tool_result_contains" in expect and not any(
            expect["tool_result_contains"] in r for r in results
        ):
            self._fail(f"turn {number}: no tool result contains {expect['tool_result_contains']!r}")
        users = [text_of(m, sep="") for m in messages if is_user(m)]
        if "user_contains" in expect and not (users and expect["user_contains"] in users[-1]):
            self._fail(f"turn {number}: last user message lacks {expect['user_contains']!r}")

    def _fail(self, message: str) -> None:
        raise ReplayError(message, provider=self.name)



def _turn_from_message(message: Message) -> dict[str, Any]:
    turn: dict[str, Any] = {"text": message.get("content") or ""}
    for key in ("reasoning", "thinking_blocks", "tool_calls"):
        if message.get(key):
            turn[key] = message[key]
    return turn
