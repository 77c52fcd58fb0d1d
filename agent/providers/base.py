"""The provider seam: stream one completion for (messages, tools) as events.

Messages use one internal shape, close to OpenAI Chat Completions, which every provider
adapter translates to and from its own wire format:

    {"role": "system", "content": str}
    {"role": "user", "content": str | [{"type": "text", "text"}, {"type": "image", "mime_type", "data"}]}
    {"role": "assistant", "content": str, "reasoning": str | None,
     "thinking_blocks": [{"type": "thinking", "thinking", "signature"} |
                         {"type": "redacted_thinking", "data"}] | None,
     "tool_calls": [{"id", "name", "arguments": str (JSON)}] | None}
    {"role": "tool", "tool_call_id": str, "name": str, "content": str}

`tools` are provider-neutral definitions: {"name", "description", "parameters" (JSON schema)}.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

Message = dict[str, Any]
ToolDef = dict[str, Any]


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


StreamEvent = TextDelta | ReasoningDelta | ToolCallRequest | Usage | Finish


class Provider(Protocol):
    """Streams completions. Raises `agent.providers.errors.ProviderError` subclasses."""

    name: str  # "provider:model"

    def stream(
        self, messages: list[Message], tools: list[ToolDef], *, max_tokens: int | None = None
    ) -> AsyncIterator[StreamEvent]: ...
