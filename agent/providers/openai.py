"""OpenAI Chat Completions adapter (OpenAI itself and compatible servers: vLLM, Ollama, ...).

The `openai` SDK is imported on the first model call, not when the provider is built
(see `agent/providers/lazy.py`).
"""

from __future__ import annotations

import uuid
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
from talaria.agent.transcript import Message, is_assistant, is_tool_result, is_user

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_FINISH = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "refusal",
}


class OpenAIProvider:
    """Streams Chat Completions. `compat=True` targets OpenAI-compatible servers: it sends
    `max_tokens` instead of `max_completion_tokens` and echoes `reasoning_content` back."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str | None = None,
        name: str | None = None,
        compat: bool = False,
        stall_timeout: float = 60.0,
        timeout: float = 600.0,
    ) -> None:
        self.model = model
        self.name = name or f"openai:{model}"
        self.compat = compat
        self.stall_timeout = stall_timeout
        self.endpoint = base_url or DEFAULT_BASE_URL
        """Where requests go: named in errors, so the user knows which server failed."""
        self._clients = LoopBoundClient(
            "openai", "AsyncOpenAI", timeout=timeout, warm="chat.completions", api_key=api_key,
            base_url=base_url or DEFAULT_BASE_URL,
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
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [self._to_wire(m) for m in messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            request["tools"] = [to_wire_tool(t) for t in tools]
        if max_tokens is not None:
            request["max_tokens" if self.compat else "max_completion_tokens"] = max_tokens
        if reasoning_effort:
            request["reasoning_effort"] = reasoning_effort
        try:
            client = await self._clients.load()  # the SDK loads off the event loop
            stream = await client.chat.completions.create(**request)
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
        calls: dict[int, dict[str, str]] = {}
        finish: str | None = None
        refused = False
        usage: Usage | None = None
        async for chunk in stall_guard(stream, self.stall_timeout, self.name):
            if chunk.usage is not None:
                usage = to_usage(chunk.usage)
            for choice in chunk.choices or ():
                delta = choice.delta
                # Compatible servers stream thinking under either name (vLLM, DeepSeek:
                # reasoning_content; OpenRouter, Ollama: reasoning).
                reasoning = getattr(delta, "reasoning_content", None) or getattr(
                    delta, "reasoning", None
                )
                if isinstance(reasoning, str) and reasoning:
                    yield ReasoningDelta(reasoning)
                if delta.content:
                    yield TextDelta(delta.content)
                if refusal := getattr(delta, "refusal", None):
                    refused = True
                    yield TextDelta(refusal)
                for fragment in delta.tool_calls or ():
                    _merge_fragment(calls, fragment)
                if choice.finish_reason:
                    finish = choice.finish_reason
        if finish is None:
            raise TimeoutError_("stream ended before a finish reason", provider=self.name)
        for index in sorted(calls):
            call = calls[index]
            call_id = call["id"] or f"call_{uuid.uuid4().hex[:24]}"
            yield ToolCallRequest(call_id, call["name"], call["arguments"] or "{}")
        if usage is not None:
            yield usage
        reason = "refusal" if refused else _FINISH.get(finish, "stop")
        if calls and reason == "stop":
            reason = "tool_calls"  # some servers report "stop" after tool calls
        yield Finish(reason)

    def _to_wire(self, message: Message) -> dict[str, Any]:
        if is_user(message):
            return {"role": "user", "content": _user_content(message["content"])}
        if is_tool_result(message):
            return {
                "role": "tool",
                "tool_call_id": message["tool_call_id"],
                "content": message.get("content") or "",
            }
        if not is_assistant(message):  # the system prompt
            return {"role": message["role"], "content": message.get("content") or ""}
        wire: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
        if message.get("tool_calls"):
            wire["content"] = message.get("content") or None
            wire["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c.get("arguments") or "{}"},
                }
                for c in message["tool_calls"]
            ]
        # OpenAI rejects unknown message fields; compatible servers use this one to keep
        # a thinking model's chain of thought across tool calls.
        if self.compat and message.get("reasoning"):
            wire["reasoning_content"] = message["reasoning"]
        return wire

    def _error(self, exc: Exception) -> ProviderError:
        sdk = self._sdk
        if isinstance(exc, sdk.APIConnectionError):  # timeouts included
            return connection_error(exc, self.name)
        if isinstance(exc, sdk.APIStatusError):
            message, code, type_ = error_fields(exc.body)
            return classify_error(
                exc.status_code,
                message or exc.message,
                code=code,
                type_=type_,
                headers=exc.response.headers,
                provider=self.name,
                body=exc.body,
            )
        if isinstance(exc, sdk.APIError):  # an error chunk inside a 200 stream
            message, code, type_ = error_fields(exc.body)
            return classify_error(
                None, message or exc.message, code=code, type_=type_, provider=self.name,
                body=exc.body,
            )
        if isinstance(exc, ValueError):  # undecodable JSON in the stream
            return ServerError(f"malformed stream data: {exc}", provider=self.name)
        return ServerError(f"{type(exc).__name__}: {exc}", provider=self.name)


def to_wire_tool(tool: ToolDef) -> dict[str, Any]:
    """A neutral tool definition as an OpenAI function tool."""
    function = {"name": tool["name"], "description": tool.get("description", "")}
    function["parameters"] = tool.get("parameters") or {"type": "object", "properties": {}}
    return {"type": "function", "function": function}


def to_usage(raw: Any) -> Usage:
    """OpenAI `usage` (prompt_tokens include the cached ones) as a `Usage`."""
    prompt_details = getattr(raw, "prompt_tokens_details", None)
    completion_details = getattr(raw, "completion_tokens_details", None)
    return Usage(
        input_tokens=raw.prompt_tokens or 0,
        output_tokens=raw.completion_tokens or 0,
        cache_read_tokens=getattr(prompt_details, "cached_tokens", None) or 0,
        reasoning_tokens=getattr(completion_details, "reasoning_tokens", None) or 0,
    )


def _user_content(content: str | list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for part in content:
        if part["type"] == "image":
            url = f"data:{part['mime_type']};base64,{part['data']}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
        else:
            parts.append({"type": "text", "text": part["text"]})
    return parts


def _merge_fragment(calls: dict[int, dict[str, str]], fragment: Any) -> None:
    index = fragment.index
    if index is None:  # some servers send whole calls without an index
        index = next((i for i, c in calls.items() if fragment.id and c["id"] == fragment.id), None)
        index = len(calls) if index is None else index
    call = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
    if fragment.id and not call["id"]:
        call["id"] = fragment.id
    function = fragment.function
    if function is not None:
        if function.name and not call["name"]:
            call["name"] = function.name
        if function.arguments:
            call["arguments"] += function.arguments
