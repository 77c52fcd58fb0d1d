"""Who writes a compaction summary: the `Summarizer` seam and its model-backed implementation."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from talaria.agent.pricing import Spend
from talaria.agent.providers.base import Provider, Retrying, TextDelta, Usage
from talaria.agent.transcript import Message


class Summarizer(Protocol):
    async def summarize(self, instructions: str, transcript: str) -> str: ...


@dataclass(slots=True)
class ProviderSummarizer:
    """Summaries from a model (the session's own by default, or `summary_model`)."""

    provider: Provider
    summary_tokens: int = 2_000
    """Output tokens a summary may take."""
    spend: Spend | None = None
    """The session's spend, which the summary's call adds to."""

    async def summarize(self, instructions: str, transcript: str,
                        on_text: Callable[[str], Awaitable[None]] | None = None) -> str:
        """The summary; `on_text` gets each piece as the model writes it (after a retry the
        pieces start over: the summary returned is the last attempt's)."""
        messages: list[Message] = [
            {"role": "system", "content": instructions},
            {"role": "user", "content": transcript},
        ]
        parts: list[str] = []
        async for event in self.provider.stream(messages, [], max_tokens=self.summary_tokens):
            if isinstance(event, Retrying):  # the stream starts over: what came is void
                parts.clear()
            elif isinstance(event, TextDelta):
                parts.append(event.text)
                if on_text is not None and event.text:
                    await on_text(event.text)
            elif isinstance(event, Usage) and self.spend is not None:
                self.spend.add(self.provider.name, {
                    "input": event.input_tokens, "output": event.output_tokens,
                    "cache_read": event.cache_read_tokens,
                    "cache_write": event.cache_write_tokens, "reasoning": event.reasoning_tokens})
        return "".join(parts)
