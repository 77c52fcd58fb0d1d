"""Who writes a compaction summary: the `Summarizer` seam and its model-backed implementation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from talaria.agent.providers.base import Provider, TextDelta
from talaria.agent.transcript import Message


class Summarizer(Protocol):
    async def summarize(self, instructions: str, transcript: str) -> str: ...


@dataclass(slots=True)
class ProviderSummarizer:
    """Summaries from a model (the session's own by default, or `summary_model`)."""

    provider: Provider
    summary_tokens: int = 2_000
    """Output tokens a summary may take."""

    async def summarize(self, instructions: str, transcript: str) -> str:
        messages: list[Message] = [
            {"role": "system", "content": instructions},
            {"role": "user", "content": transcript},
        ]
        parts: list[str] = []
        async for event in self.provider.stream(messages, [], max_tokens=self.summary_tokens):
            if isinstance(event, TextDelta):
                parts.append(event.text)
        return "".join(parts)
