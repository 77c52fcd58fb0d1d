"""LLM providers behind one seam: `Provider.stream(messages, tools)` yields `StreamEvent`s.

    base.py       the seam: events, the `Provider` protocol (messages: `agent.transcript`)
    errors.py     classified failures
    factory.py    `create_provider("provider:model")`, `create_retrying_provider`
    retry.py      error classification, retries with backoff, fallback models
    openai.py     Chat Completions (OpenAI and compatible servers)
    anthropic.py  Messages (thinking, prompt caching)
    replay.py     recorded turns, for deterministic runs

Importing this package imports no SDK; a provider imports its SDK when it is built.

May import `talaria.tools.errors` and `talaria.agent.transcript` (the message shape);
nothing else of ours.
"""

from __future__ import annotations

from talaria.agent.providers.base import (
    Finish,
    Provider,
    ReasoningDelta,
    Retrying,
    StreamEvent,
    TextDelta,
    ToolCallRequest,
    ToolDef,
    Usage,
)
from talaria.agent.providers.errors import ProviderError
from talaria.agent.providers.factory import (
    create_provider,
    create_retrying_provider,
    has_credentials,
)

__all__ = [
    "Finish",
    "Provider",
    "ProviderError",
    "ReasoningDelta",
    "Retrying",
    "StreamEvent",
    "TextDelta",
    "ToolCallRequest",
    "ToolDef",
    "Usage",
    "create_provider",
    "create_retrying_provider",
    "has_credentials",
]
