"""Anthropic Messages adapter: streaming, extended thinking and prompt caching.

The `anthropic` SDK is imported on the first model call, not when the provider is built
(see `agent/providers/lazy.py`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

from talaria.agent.providers.base import (
    Finish,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallRequest,
    ToolDef,
    Usage,
)
from talaria.agent.providers.errors import (
    ProviderError,
    ServerError,
    TimeoutError_,
)
from talaria.agent.providers.lazy import LoopBoundClient
from talaria.agent.providers.retry import (
    classify_error,
    connection_error,
    error_fields,
    stall_guard,
)
from talaria.agent.transcript import Message, is_assistant, is_system, is_tool_result

DEFAULT_BASE_URL = "https://api.anthropic.com"
CACHED_USER_TURNS = 2  # + the system prompt = 3 of the 4 cache breakpoints the API allows
_EPHEMERAL = {"type": "ephemeral"}
_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "refusal",
}


REQUIRED_MAX_TOKENS = 4096
"""Anthropic requires `max_tokens`; sent when neither the call nor the provider gives one."""
THINKING_BUDGETS = {"low": 2_048, "medium": 8_192, "high": 24_576}
"""Extended-thinking budget (tokens) for each reasoning effort."""


class AnthropicProvider:
    """Streams Claude messages; `thinking_budget` turns on extended thinking."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        name: str | None = None,
        thinking_budget: int | None = None,
        max_tokens: int | None = None,
        auth_token: str | None = None,
        stall_timeout: float = 60.0,
        timeout: float = 600.0,
    ) -> None:
        self.model = model
        self.name = name or f"anthropic:{model}"
        self.thinking_budget = thinking_budget
        self.max_tokens = max_tokens
        self.stall_timeout = stall_timeout
        self.endpoint = base_url or DEFAULT_BASE_URL
        """Where requests go: named in errors, so the user knows which server failed."""
        self._clients = LoopBoundClient(
            "anthropic", "AsyncAnthropic", timeout=timeout, warm="messages", api_key=api_key,
            auth_token=None if api_key else auth_token, base_url=base_url or DEFAULT_BASE_URL,
        )

    @property
    def _sdk(self) -> Any:
        return self._clients.sdk

    @property
    def _client(self) -> Any:
        return self._clients.get()

    async def warm(self) -> None:
        await self._clients.load()

    async def stream(
        self, messages: Sequence[Message], tools: list[ToolDef], *, max_tokens: int | None = None,
        reasoning_effort: str | None = None,
    ) -> AsyncIterator[StreamEvent]:
        system, wire_messages = to_wire_messages(messages)
        request: dict[str, Any] = {
            "model": self.model,
            "messages": wire_messages,
            "max_tokens": max_tokens or self.max_tokens or REQUIRED_MAX_TOKENS,
            "stream": True,
        }
        if system:
            request["system"] = system
        if tools:
            request["tools"] = [
                {
                    "name": t["name"],
                    "description": t.get("description", ""),
                    "input_schema": t.get("parameters") or {"type": "object", "properties": {}},
                }
                for t in tools
            ]
        budget = THINKING_BUDGETS.get(reasoning_effort or "", self.thinking_budget)
        if budget:
            request["thinking"] = {"type": "enabled", "budget_tokens": budget}
            # The API requires max_tokens > budget_tokens.
            request["max_tokens"] = max(request["max_tokens"], budget + 1024)
        try:
            client = await self._clients.load()  # the SDK loads off the event loop
            stream = await client.messages.create(**request)
        except Exception as exc:
            raise self._error(exc) from exc
        try:
            async for event in self._events(stream):
                yield event
        except ProviderError:
            raise
        except Exception as exc:
            raise self._error(exc) from exc
        finally:
            await stream.close()

    async def _events(self, stream: Any) -> AsyncIterator[StreamEvent]:
        blocks: dict[int, dict[str, Any]] = {}
        done: list[dict[str, Any]] = []
        usage: dict[str, int] = {}
        stop_reason: str | None = None
        stopped = False
        async for event in stall_guard(stream, self.stall_timeout, self.name):
            kind = event.type
            if kind == "message_start":
                _add_usage(usage, event.message.usage)
            elif kind == "content_block_start":
                blocks[event.index] = event.content_block.model_dump(exclude_none=True)
                blocks[event.index]["_json"] = ""
            elif kind == "content_block_delta":
                block, delta = blocks[event.index], event.delta
                if delta.type == "text_delta":
                    yield TextDelta(delta.text)
                elif delta.type == "thinking_delta":
                    block["thinking"] = block.get("thinking", "") + delta.thinking
                    yield ReasoningDelta(delta.thinking)
                elif delta.type == "signature_delta":
                    block["signature"] = block.get("signature", "") + delta.signature
                elif delta.type == "input_json_delta":
                    block["_json"] += delta.partial_json
            elif kind == "content_block_stop":
                done.append(blocks.pop(event.index))
            elif kind == "message_delta":
                stop_reason = event.delta.stop_reason or stop_reason
                _add_usage(usage, event.usage)
            elif kind == "message_stop":
                stopped = True
        if not stopped:
            raise TimeoutError_("stream ended before message_stop", provider=self.name)
        calls = [b for b in done if b["type"] == "tool_use"]
        for call in calls:
            yield ToolCallRequest(call["id"], call["name"], call["_json"] or "{}")
        yield Usage(
            input_tokens=sum(usage.get(k, 0) for k in ("input", "cache_read", "cache_write")),
            output_tokens=usage.get("output", 0),
            cache_read_tokens=usage.get("cache_read", 0),
            cache_write_tokens=usage.get("cache_write", 0),
            reasoning_tokens=usage.get("reasoning", 0),
        )
        thinking = [
            {k: b.get(k, "") for k in ("type", "thinking", "signature")}
            if b["type"] == "thinking"
            else {"type": "redacted_thinking", "data": b.get("data", "")}
            for b in done
            if b["type"] in ("thinking", "redacted_thinking")
        ]
        reason = _STOP.get(stop_reason or "", "tool_calls" if calls else "stop")
        yield Finish(reason, {"thinking_blocks": thinking} if thinking else {})

    def _error(self, exc: Exception) -> ProviderError:
        sdk = self._sdk
        if isinstance(exc, sdk.APIConnectionError):  # timeouts included
            return connection_error(exc, self.name)
        if isinstance(exc, _transport_errors()):
            # The SDK lets HTTP-client errors through once the stream has started.
            message = f"connection lost mid-stream: {type(exc).__name__}: {exc}"
            return TimeoutError_(message, provider=self.name)
        if isinstance(exc, sdk.APIStatusError):
            message, code, type_ = error_fields(exc.body)
            return classify_error(
                exc.status_code,
                message or exc.message,
                code=getattr(exc, "error_code", None) or code,
                type_=type_,
                headers=exc.response.headers,
                provider=self.name,
                body=exc.body,
            )
        if isinstance(exc, ValueError):  # undecodable JSON in the stream
            return ServerError(f"malformed stream data: {exc}", provider=self.name)
        return ServerError(f"{type(exc).__name__}: {exc}", provider=self.name)


def _transport_errors() -> tuple[type[BaseException], ...]:
    import anyio

    # Whichever HTTP client the installed SDK uses (httpx2 now, httpx before) is loaded.
    clients = (sys.modules.get(name) for name in ("httpx2", "httpx"))
    return (anyio.EndOfStream, OSError, *(c.RequestError for c in clients if c is not None))


def to_wire_messages(messages: Sequence[Message]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(system blocks, messages) in Anthropic's shape, with prompt-cache breakpoints set."""
    system = [
        {"type": "text", "text": m["content"]}
        for m in messages
        if is_system(m) and m.get("content")
    ]
    if system:
        system[-1]["cache_control"] = dict(_EPHEMERAL)
    wire: list[dict[str, Any]] = []
    for message in messages:
        if is_system(message):
            continue
        assistant = is_assistant(message)
        blocks = _assistant_blocks(message) if assistant else _user_blocks(message)
        wire_role = "assistant" if assistant else "user"
        if not blocks:
            continue
        if wire and wire[-1]["role"] == wire_role:
            # Consecutive tool results (and a user note after them) form one user turn.
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": wire_role, "content": blocks})
    for turn in [w for w in wire if w["role"] == "user"][-CACHED_USER_TURNS:]:
        turn["content"][-1]["cache_control"] = dict(_EPHEMERAL)
    return system, wire


def _user_blocks(message: Message) -> list[dict[str, Any]]:
    content = message.get("content") or ""
    if is_tool_result(message):
        block = {"type": "tool_result", "tool_use_id": message["tool_call_id"]}
        if content:  # an empty result is sent without content rather than as ""
            block["content"] = _content_blocks(content) if isinstance(content, list) else content
        return [block]
    return _content_blocks(content)


def _content_blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks = []
    for part in content:
        if part["type"] == "image":
            source = {"type": "base64", "media_type": part["mime_type"], "data": part["data"]}
            blocks.append({"type": "image", "source": source})
        else:
            blocks.append({"type": "text", "text": part["text"]})
    return blocks


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    # Thinking blocks go back first and verbatim: the API checks their signatures.
    blocks = [dict(b) for b in message.get("thinking_blocks") or ()]
    if message.get("content"):
        blocks.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or ():
        blocks.append(
            {"type": "tool_use", "id": call["id"], "name": call["name"], "input": _input(call)}
        )
    return blocks


def _input(call: dict[str, Any]) -> dict[str, Any]:
    try:
        value = json.loads(call.get("arguments") or "{}")
    except json.JSONDecodeError:
        return {"_raw_arguments": call.get("arguments")}
    return value if isinstance(value, dict) else {"value": value}


def _add_usage(totals: dict[str, int], raw: Any) -> None:
    # message_delta counts are cumulative, so later values replace earlier ones.
    pairs = {
        "input": "input_tokens",
        "output": "output_tokens",
        "cache_read": "cache_read_input_tokens",
        "cache_write": "cache_creation_input_tokens",
    }
    for key, field in pairs.items():
        value = getattr(raw, field, None)
        if value is not None:
            totals[key] = value
    details = getattr(raw, "output_tokens_details", None)
    if details is not None and getattr(details, "thinking_tokens", None) is not None:
        totals["reasoning"] = details.thinking_tokens
