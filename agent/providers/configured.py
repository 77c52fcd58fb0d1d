"""The configured model as a provider: what every session, review and worker starts from.
Light on purpose: an editor's `session/new` makes it before answering (a missing model is
that request's error), without the session machinery."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from talaria.agent.providers.base import Provider

if TYPE_CHECKING:
    from talaria.agent.config import Config

log = logging.getLogger(__name__)


def make_provider(config: Config, model: str | None = None) -> Provider:
    """The configured model with retries and fallbacks. Raises NotConfiguredError (an
    AuthError) without a model or credentials."""
    from talaria.agent.providers.factory import create_retrying_provider

    chosen = model or config.model
    if not chosen:
        from talaria.agent.providers.errors import NotConfiguredError

        # No local path: this line also reaches editors (ACP `data`).
        raise NotConfiguredError(
            "no model configured: set TALARIA_MODEL (e.g. openai:gpt-4.1 with OPENAI_API_KEY, "
            "or anthropic:claude-sonnet-4-5 with ANTHROPIC_API_KEY), or `model = \"...\"` in "
            "$TALARIA_HOME/config.toml, or run `talaria setup`"
        )
    return create_retrying_provider(
        chosen, list(config.fallback_models), providers=config.providers, env=config.provider_env()
    )


async def warm_sdk(provider: Provider) -> None:
    """Load `provider`'s SDK ahead of its first call (in a worker thread); a failure is left
    for that call to report, with its cause."""
    try:
        await provider.warm()
    except Exception as exc:
        log.info("could not load the model's SDK ahead of the first prompt: %s", exc)
