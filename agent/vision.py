"""vision_analyze's ends in the agent: whether a session offers it, whether its model sees
images, and the auxiliary `vision_model` that answers for a model that does not."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import anyio

from talaria.agent.config import Config
from talaria.agent.providers.base import Provider, Retrying, TextDelta
from talaria.agent.transcript import Message
from talaria.tools.errors import VisionError
from talaria.tools.handoffs import Describer, Vision

if TYPE_CHECKING:
    from talaria.agent.session import Session

TOOL = "vision_analyze"
MAX_TOKENS = 1024
"""Output tokens of one answer of the vision model."""
TIMEOUT_S = 120.0
"""Whole call of the vision model, retries included."""
MAX_LIVE_IMAGES = 8
"""Images attached by tools that stay in the live context; older ones become a note. Every
request carries every image: thirty 1 MB screenshots would pass Anthropic's 32 MB request
limit long before compaction counts them (1,000 tokens each)."""
RETIRED = "[image omitted: an older image; call vision_analyze again to see it]"
INSTRUCTIONS = ("\n\n(Answer from the image: be precise, quote text in it exactly, say what "
                "you cannot make out.)")


def retired_images(messages: Sequence[Message], keep: int = MAX_LIVE_IMAGES) -> dict[int, Message]:
    """The images of all but the newest `keep` tool-attached messages replaced by a note: the
    changed messages by index, for the live context only (the store's transcript keeps them)."""
    seen, changed = 0, {}
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        parts = message.get("content") if message.get("tool_image") else None
        if not isinstance(parts, list) or not any(p.get("type") == "image" for p in parts):
            continue
        seen += 1
        if seen > keep:
            changed[index] = {**message, "content": [
                p if p.get("type") != "image" else {"type": "text", "text": RETIRED} for p in parts]}
    return changed


def offered(config: Config, model: str, tool_names: tuple[str, ...], default: tuple[str, ...]) -> bool:
    """The default tool set, or one naming it, gets vision_analyze where it can do something:
    the model sees images or a vision_model is set (elsewhere it would only ever fail)."""
    wanted = tool_names == default or TOOL in tool_names
    return wanted and (config.supports_images(model) or bool(config.vision_model))


def vision_state(config: Config, session: Session, make: Callable[[], Provider]) -> Vision:
    """What the session's vision_analyze may do; `make` builds the vision model's provider
    (called at its first use, so a session without images never builds it)."""
    describe = describer(make, config.vision_model) if config.vision_model else None
    return Vision(sees=lambda: session.supports_images, describe=describe,
                  model=config.vision_model, allow=config.web_allow_networks)


def describer(make: Callable[[], Provider], name: str) -> Describer:
    provider: list[Provider] = []

    async def describe(mime_type: str, data: str, question: str) -> str:
        from talaria.agent.providers.errors import ProviderError

        try:
            if not provider:
                provider.append(make())
            messages = [{"role": "user", "content": [
                {"type": "text", "text": question + INSTRUCTIONS},
                {"type": "image", "mime_type": mime_type, "data": data},
            ]}]
            text: list[str] = []
            with anyio.fail_after(TIMEOUT_S):
                async for event in provider[0].stream(messages, [], max_tokens=MAX_TOKENS):
                    if isinstance(event, Retrying):
                        text.clear()  # that attempt's output is void
                    elif isinstance(event, TextDelta):
                        text.append(event.text)
        except ProviderError as exc:
            raise VisionError(f"the vision model {name} failed: {exc}") from None
        except TimeoutError:
            raise VisionError(f"the vision model {name} gave no answer within {TIMEOUT_S:g} s") from None
        return "".join(text)

    return describe
