"""The provider seam: stream one completion for (messages, tools) as events.

Messages use one internal shape, close to OpenAI Chat Completions, which every provider
adapter translates to and from its own wire format: the rows of `talaria.agent.transcript`
(system, user, assistant, tool); an adapter sends what the model reads of them and ignores the
record's other keys (usage, display, ...).

`tools` are provider-neutral definitions: {"name", "description", "parameters" (JSON schema)}.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from talaria.agent.transcript import AssistantExtras, Message

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
    extras: AssistantExtras = field(default_factory=lambda: AssistantExtras())
    """Provider-specific keys of the assistant message, kept for the next turn (Anthropic's
    thinking blocks with their signatures)."""


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
        self, messages: Sequence[Message], tools: list[ToolDef], *, max_tokens: int | None = None,
        reasoning_effort: str | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """`reasoning_effort`: low | medium | high, or None for the model's default."""
        ...
