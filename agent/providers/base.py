"""The provider seam: stream one completion for (messages, tools) as events.

Messages use one internal shape, close to OpenAI Chat Completions, which every provider
adapter translates to and from its own wire format:

    {"role": "system", "content": str}
    {"role": "user", "content": str | [{"type": "text", "text"}, {"type": "image", "mime_type", "data"}],
     "tool_image": str | None}   # set: an image a tool call (that id) attached, not a prompt
    {"role": "assistant", "content": str, "reasoning": str | None,
     "thinking_blocks": [{"type": "thinking", "thinking", "signature"} |
                         {"type": "redacted_thinking", "data"}] | None,
     "tool_calls": [{"id", "name", "arguments": str (JSON)}] | None}
    {"role": "tool", "tool_call_id": str, "name": str, "content": str}

`tools` are provider-neutral definitions: {"name", "description", "parameters" (JSON schema)}.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

Message = dict[str, Any]
ToolDef = dict[str, Any]


def call_arguments(call: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a recorded tool call as a dict; {} when the model sent bad JSON."""
    try:
        args = json.loads(call.get("arguments") or "{}")
    except json.JSONDecodeError:
        return {}
    return args if isinstance(args, dict) else {}


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """One complete tool call, assembled from streamed fragments."""

    id: str
    name: str
    arguments: str  # JSON text exactly as the model produced it


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one completion. `input_tokens` is the whole prompt, cached parts
    included (the context size); `cache_read_tokens` / `cache_write_tokens` are subsets of it."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Finish:
    """Last event of a stream. `reason` is one of: stop, tool_calls, length, refusal."""

    reason: str
    # Provider-specific assistant-message extras to keep for the next turn
    # (e.g. Anthropic thinking blocks with their signatures).
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Retrying:
    """The attempt so far failed and its partial output is void; another attempt follows.

    Sent by `RetryingProvider` before each retry (same provider, after `delay` seconds) and
    before each fallback (`provider` is then the next one in the list).
    """

    attempt: int  # 1 for the first retry or fallback of this stream, then 2, 3...
    delay: float  # seconds waited before the next attempt
    error: str  # the failure, worded for the user
    provider: str  # "provider:model" of the next attempt


StreamEvent = TextDelta | ReasoningDelta | ToolCallRequest | Usage | Finish | Retrying


class Provider(Protocol):
    """Streams completions. Raises `talaria.agent.providers.errors.ProviderError` subclasses."""

    @property
    def name(self) -> str:
        """"provider:model"."""
        ...

    async def warm(self) -> None:
        """Import the SDK and build the client now, off the event loop, so the first call
        does not pay for it (front doors call this once a session exists)."""
        ...

    def stream(
        self, messages: list[Message], tools: list[ToolDef], *, max_tokens: int | None = None,
        reasoning_effort: str | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """`reasoning_effort`: low | medium | high, or None for the model's default."""
        ...
