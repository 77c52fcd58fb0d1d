"""Build a provider from a model string `provider:model`.

    openai:gpt-4.1                 OPENAI_API_KEY, OPENAI_BASE_URL
    anthropic:claude-sonnet-4-5    ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN), ANTHROPIC_BASE_URL
    replay:/path/to/scenario.json  recorded turns, no network
    NAME:model                     an OpenAI-compatible endpoint from a `providers` table
                                   {base_url, api_key_env, context_window, api?, compat?};
                                   built in: ollama, openrouter, vllm and llamacpp (these two
                                   need base_url from the config)

A string without a prefix is `anthropic:` for claude* names and `openai:` otherwise.
Nothing here imports an SDK until a provider is actually built.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from talaria.agent.providers.base import Provider
from talaria.agent.providers.errors import (
    ModelNotFoundError,
    NotConfiguredError,
    ProviderError,
)
from talaria.agent.providers.retry import RetryingProvider

log = logging.getLogger(__name__)

BUILTIN_ENDPOINTS: dict[str, dict[str, Any]] = {
    "ollama": {"base_url": "http://localhost:11434/v1"},
    "openrouter": {"base_url": "https://openrouter.ai/api/v1", "api_key_env": "OPENROUTER_API_KEY"},
    "vllm": {},
    "llamacpp": {},
}
NO_KEY = "not-needed"  # the SDK refuses an empty key; keyless local servers ignore this one
_OPTIONS = {
    "openai": {"stall_timeout", "timeout"},
    "anthropic": {"stall_timeout", "timeout", "thinking_budget", "max_tokens"},
}


@dataclass(frozen=True, slots=True)
class _Spec:
    """A model string resolved against config and environment, before any SDK is touched."""

    kind: str  # "openai" | "anthropic" | "replay"
    model: str
    name: str
    api_key: str | None = None
    missing_key: str | None = None  # the variable to set when the key is absent
    base_url: str | None = None
    compat: bool = False
    auth_token: str | None = None


def create_provider(
    model: str,
    *,
    providers: dict[str, dict] | None = None,
    env: Mapping[str, str] | None = None,
    **options: Any,
) -> Provider:
    """The provider for `model`; raises `NotConfiguredError` when its key is missing."""
    unknown = set(options) - set().union(*_OPTIONS.values())
    if unknown:
        raise TypeError(f"unknown provider options: {sorted(unknown)}")
    spec = _resolve(model, providers, os.environ if env is None else env)
    if spec.kind == "replay":
        from talaria.agent.providers.replay import ReplayProvider

        return ReplayProvider(spec.model, name=spec.name)
    if spec.missing_key:
        message = f"{spec.missing_key} is not set: export it, or run `talaria setup`"
        raise NotConfiguredError(message, provider=spec.name)
    accepted = {k: v for k, v in options.items() if k in _OPTIONS[spec.kind]}
    if spec.kind == "anthropic":
        from talaria.agent.providers.anthropic import AnthropicProvider

        return AnthropicProvider(
            spec.model,
            api_key=spec.api_key,
            auth_token=spec.auth_token,
            base_url=spec.base_url,
            name=spec.name,
            **accepted,
        )
    from talaria.agent.providers.openai import OpenAIProvider

    return OpenAIProvider(
        spec.model,
        api_key=spec.api_key or NO_KEY,
        base_url=spec.base_url,
        name=spec.name,
        compat=spec.compat,
        **accepted,
    )


def create_retrying_provider(
    model: str,
    fallback_models: Iterable[str] = (),
    *,
    providers: dict[str, dict] | None = None,
    env: Mapping[str, str] | None = None,
    max_retries: int = 3,
    base_delay: float = 1.0,
    max_delay: float = 30.0,
    max_retry_after: float = 60.0,
    sleep: Callable[[float], Awaitable[object]] = anyio.sleep,
    **options: Any,
) -> RetryingProvider:
    """`model` with retries, then `fallback_models` in order. A fallback that cannot be built
    (say, its key is missing) is skipped with a warning; the primary's errors raise."""
    chain = [create_provider(model, providers=providers, env=env, **options)]
    for fallback in fallback_models:
        try:
            chain.append(create_provider(fallback, providers=providers, env=env, **options))
        except ProviderError as exc:
            log.warning("skipping fallback model %s: %s", fallback, exc.user_message())
    return RetryingProvider(
        chain,
        max_retries=max_retries,
        base_delay=base_delay,
        max_delay=max_delay,
        max_retry_after=max_retry_after,
        sleep=sleep,
    )


def has_credentials(
    model: str, providers: dict[str, dict] | None = None, env: Mapping[str, str] | None = None
) -> bool:
    """Whether `create_provider(model)` would find what it needs (key, base URL, file)."""
    try:
        spec = _resolve(model, providers, os.environ if env is None else env)
    except ProviderError:
        return False
    if spec.kind == "replay":
        return os.path.isfile(spec.model)
    return spec.missing_key is None


def split_model(model: str) -> tuple[str, str]:
    """("provider", "model") from "provider:model"; a bare name gets a provider by its look."""
    prefix, sep, rest = model.partition(":")
    if sep and rest:
        return prefix, rest
    return ("anthropic" if model.startswith("claude") else "openai"), model


def _resolve(model: str, providers: dict[str, dict] | None, env: Mapping[str, str]) -> _Spec:
    prefix, name = split_model(model)
    full = f"{prefix}:{name}"
    if prefix == "replay":
        return _Spec("replay", name, full)
    if prefix == "openai":
        key = env.get("OPENAI_API_KEY") or None
        return _Spec(
            "openai",
            name,
            full,
            api_key=key,
            missing_key=None if key else "OPENAI_API_KEY",
            base_url=env.get("OPENAI_BASE_URL") or None,
        )
    if prefix == "anthropic":
        key, token = env.get("ANTHROPIC_API_KEY") or None, env.get("ANTHROPIC_AUTH_TOKEN") or None
        return _Spec(
            "anthropic",
            name,
            full,
            api_key=key,
            auth_token=token,
            missing_key=None if key or token else "ANTHROPIC_API_KEY",
            base_url=env.get("ANTHROPIC_BASE_URL") or None,
        )
    table = {**BUILTIN_ENDPOINTS.get(prefix, {}), **(providers or {}).get(prefix, {})}
    if prefix not in BUILTIN_ENDPOINTS and prefix not in (providers or {}):
        raise ModelNotFoundError(
            f"unknown provider {prefix!r} in {model!r}; use openai:, anthropic:, replay:, "
            f"{', '.join(f'{p}:' for p in BUILTIN_ENDPOINTS)} or a [providers.NAME] table",
            provider=full,
        )
    if not table.get("base_url"):
        raise NotConfiguredError(
            f"provider {prefix!r} needs a base_url: set base_url in [providers.{prefix}] of "
            "$TALARIA_HOME/config.toml",
            provider=full,
        )
    key_env = table.get("api_key_env")
    key = (env.get(key_env) or None) if key_env else NO_KEY
    return _Spec(
        "anthropic" if table.get("api") == "anthropic" else "openai",
        name,
        full,
        api_key=key,
        missing_key=key_env if key is None else None,
        base_url=table["base_url"],
        compat=bool(table.get("compat", True)),
    )
