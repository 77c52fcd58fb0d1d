"""The provider SDKs a batch's models need, loaded before any task's model time starts.

Importing an SDK and the modules its client loads lazily takes 0.3-1 s on a quiet machine
and 6-7 s on a loaded one. Paid inside a task's first model call, it would be counted as
model time (`model_s`); paid here, it is set-up, outside every model call.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import Any

_warmed: set[str] = set()


def sdk_modules(models: tuple[str, ...] | list[str]) -> list[str]:
    """The SDK module each model's provider imports on its first call."""
    from talaria.agent.providers.factory import split_model

    kinds = {split_model(m)[0] for m in models if m}
    return sorted({"anthropic" if k == "anthropic" else "openai" for k in kinds - {"replay"}})


def warm_sdk(name: str) -> None:
    """Import SDK `name` and the modules its client loads on first use (once per process)."""
    if name in _warmed:
        return
    sdk = importlib.import_module(name)
    with contextlib.suppress(Exception):  # a client only to load its modules: never used
        if name == "openai":
            importlib.import_module("talaria.agent.providers.openai")
            sdk.AsyncOpenAI(api_key="warm-up").chat.completions  # noqa: B018
            _build(sdk.types.chat.ChatCompletionChunk)
        elif name == "anthropic":
            importlib.import_module("talaria.agent.providers.anthropic")
            sdk.AsyncAnthropic(api_key="warm-up").messages  # noqa: B018
            types = sdk.types
            for event in ("RawMessageStartEvent", "RawMessageDeltaEvent", "RawMessageStopEvent",
                          "RawContentBlockStartEvent", "RawContentBlockDeltaEvent",
                          "RawContentBlockStopEvent"):
                _build(getattr(types, event))
    _warmed.add(name)


def _build(model: Any) -> None:
    """Build a response model's pydantic schema now: the SDKs defer it to the first chunk
    they parse (~80 ms), which would land inside the first model call's time."""
    model.model_rebuild(force=True)


def warm_models(models: tuple[str, ...] | list[str]) -> None:
    """Warm the SDK of every model (no network: clients are built, never called)."""
    for name in sdk_modules(models):
        warm_sdk(name)
