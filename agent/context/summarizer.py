"""Who writes a compaction summary: the `Summarizer` seam and its model-backed implementation."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from talaria.agent.providers.base import Provider, Retrying, TextDelta
from talaria.agent.transcript import Message


class Summarizer(Protocol):
    async def summarize(self, instructions: str, transcript: str) -> str: ...


@dataclass(slots=True)
class ProviderSummarizer:
    """Summaries from a model (the session's own by default, or `summary_model`)."""

    provider: Provider
    summary_tokens: int = 2_000
    """Output tokens a summary may take."""

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
        return "".join(parts)
