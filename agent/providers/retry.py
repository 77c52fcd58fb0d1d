"""Retry policy: classify HTTP failures, back off and retry, then fall back to other models.

`classify_error` turns a status code and an error body into an `errors.ProviderError`
subclass; both SDK adapters use it, so the same failure reads the same whichever API sent it.
`RetryingProvider` owns retrying (the SDKs' own retries are disabled).
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import Any, TypeVar, cast

import anyio

from talaria.agent.providers.base import Provider, Retrying, StreamEvent, ToolDef
from talaria.agent.providers.errors import (
    AuthError,
    BadRequestError,
    BillingError,
    ContentPolicyError,
    ContextOverflowError,
    ModelNotFoundError,
    OverloadedError,
    PayloadTooLargeError,
    ProviderError,
    RateLimitError,
    ServerError,
    TimeoutError_,
    UnreachableError,
)
from talaria.agent.transcript import Message

# What failures say, searched case-blind. Strings: `re` compiles (and caches) them at the first
# failure to classify; compiled here, they cost every session's opening ~1 ms.
_BILLING = r"insufficient_quota|billing|\bcredits?\b|payment required|exceeded your current quota"
_OVERLOADED = r"overloaded"
_CONTEXT = (
    r"context_length_exceeded|maximum context length|context window|prompt is too long"
    r"|too many tokens|input is too long|reduce the length|exceed_context_size"
    r"|exceeds? (?:the )?(?:available )?context (?:size|length|limit)|maximum model length"
    r"|too large for model with|maximum number of tokens allowed|context length of only"
    r"|input length exceeds|`max_new_tokens` must be|exceeds? the configured limit"
    r"|too long and exceeds limit"
)
_MODEL = r"model_not_found|model not found|no such model|unknown model"
_POLICY = r"content_filter|content.policy|content management policy|safety system"
_T = TypeVar("_T")
# Mid-stream errors arrive inside a 200 response: their `type` stands in for the status.
_TYPE_STATUS = {
    "authentication_error": 401,
    "permission_error": 403,
    "billing_error": 402,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "overloaded_error": 529,
    "api_error": 500,
    "server_error": 500,
    "timeout_error": 504,
    "invalid_request_error": 400,
}


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from `retry-after-ms`, else `Retry-After` (seconds or an HTTP date)."""
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    try:
        if (ms := lower.get("retry-after-ms")) is not None:
            return max(0.0, float(ms) / 1000)
    except ValueError:
        pass
    value = lower.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    import email.utils  # a date here is rare; the email package costs every session ~15 ms

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_fields(body: Any) -> tuple[str, str | None, str | None]:
    """(message, code, type) from an error body: `{"error": {...}}`, the inner dict, or text."""
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        body = body["error"]
    if not isinstance(body, Mapping):
        return (str(body) if body else "", None, None)
    code, type_ = body.get("code"), body.get("type")
    return (
        str(body.get("message") or ""),
        str(code) if code is not None else None,
        str(type_) if type_ is not None else None,
    )


async def stall_guard(
    chunks: AsyncIterator[_T], seconds: float, provider: str
) -> AsyncIterator[_T]:
    """Re-yields `chunks`, raising `TimeoutError_` when none arrives for `seconds`."""
    iterator = aiter(chunks)
    while True:
        try:
            with anyio.fail_after(seconds):
                chunk = await anext(iterator)
        except StopAsyncIteration:
            return
        except TimeoutError:
            message = f"stream stalled: no data for {seconds:g} s"
            raise TimeoutError_(message, provider=provider) from None
        yield chunk


def connection_error(exc: BaseException, provider: str) -> ProviderError:
    """An SDK connection error (timeouts included): `UnreachableError` when no connection was
    made (refused, DNS, TLS, connect timeout), else the connection broke or stalled."""
    cause = exc.__cause__ or exc
    # By class name: httpx (the SDKs' HTTP client) may be swapped or absent in a test double.
    kinds = {cls.__name__ for cls in type(cause).__mro__}
    if kinds & {"ConnectError", "ConnectTimeout"}:
        return UnreachableError(str(cause) or type(cause).__name__, provider=provider)
    if "TimeoutException" in kinds or "timed out" in str(exc).lower():
        return TimeoutError_("request timed out", provider=provider)
    return TimeoutError_(f"connection failed: {cause}", provider=provider)


def classify_error(
    status: int | None,
    message: str,
    *,
    code: str | None = None,
    type_: str | None = None,
    headers: Mapping[str, str] | None = None,
    provider: str = "",
    body: Any = None,
) -> ProviderError:
    """The `ProviderError` subclass for an HTTP status plus the error body's message/code/type.
    `body`: the whole error body, where a server puts more (llama.cpp's `n_ctx`)."""
    if status in (None, 200):
        status = _TYPE_STATUS.get(type_ or "")
    text = " ".join(filter(None, (code, type_, message)))
    if status == 402 or re.search(_BILLING, text, re.I):
        cls: type[ProviderError] = BillingError
    elif status in (401, 403):
        cls = AuthError
    elif status == 529 or re.search(_OVERLOADED, text, re.I):
        cls = OverloadedError
    elif status == 429:
        cls = RateLimitError
    elif status == 408:
        cls = TimeoutError_
    elif status is not None and status >= 500:
        cls = ServerError
    elif re.search(_CONTEXT, text, re.I):
        cls = ContextOverflowError
    elif status == 413:
        cls = PayloadTooLargeError
    elif status == 404 or re.search(_MODEL, text, re.I):
        cls = ModelNotFoundError
    elif re.search(_POLICY, text, re.I):
        cls = ContentPolicyError
    elif status is None:
        cls = ServerError  # an unexplained failure mid-stream: worth another try
    else:
        cls = BadRequestError
    if cls is ContextOverflowError:
        return ContextOverflowError(message or f"HTTP {status}", status=status,
                                    provider=provider, details=error_details(body))
    return cls(
        message or f"HTTP {status}",
        status=status,
        retry_after=parse_retry_after(headers),
        provider=provider,
    )


def error_details(body: Any) -> Mapping[str, Any] | None:
    """The inner error object of an error body (`{"error": {...}}`), or the body itself."""
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        return cast(Mapping[str, Any], body["error"])
    return body if isinstance(body, Mapping) else None


# Worth another provider even though retrying the same one is pointless.
_FALLBACK_ON = (AuthError, BillingError, ModelNotFoundError)


class RetryingProvider:
    """Retries the active provider with jittered exponential backoff, then falls back.

    Once a fallback takes over it stays active for later calls: a primary that just failed
    all its retries would only cost the user the same wait again on the next turn.
    """

    def __init__(
        self,
        providers: list[Provider],
        *,
        max_retries: int = 3,
        base_delay: float = 1.0,
        max_delay: float = 30.0,
        max_retry_after: float = 60.0,
        sleep: Callable[[float], Awaitable[object]] = anyio.sleep,
        jitter: Callable[[], float] | None = None,
    ) -> None:
        if not providers:
            raise ValueError("RetryingProvider needs at least one provider")
        self.providers = list(providers)
        self.max_retries = max_retries
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.max_retry_after = max_retry_after
        self._sleep = sleep
        self._jitter = jitter or _random
        self._active = 0

    @property
    def name(self) -> str:
        return self.providers[self._active].name

    async def warm(self) -> None:
        """Load the model that will be called first (a fallback loads when it is needed)."""
        await self.providers[self._active].warm()

    def delay_for(self, retry: int, error: ProviderError) -> float:
        """Seconds before retry number `retry` (1-based) after `error`."""
        if error.retry_after is not None:
            return min(error.retry_after, self.max_retry_after)
        ceiling = min(self.max_delay, self.base_delay * 2 ** (retry - 1))
        return ceiling * (0.5 + self._jitter() / 2)

    async def stream(
        self, messages: Sequence[Message], tools: list[ToolDef], *, max_tokens: int | None = None,
        reasoning_effort: str | None = None,
    ) -> AsyncIterator[StreamEvent]:
        attempt = 0
        while True:
            provider = self.providers[self._active]
            retries = 0
            while True:
                try:
                    stream = provider.stream(
                        messages, tools, max_tokens=max_tokens, reasoning_effort=reasoning_effort)
                    # Every provider's stream is an async generator (closed, even when abandoned).
                    async with aclosing(cast(AsyncGenerator[StreamEvent, None], stream)) as events:
                        async for event in events:
                            yield event
                    return
                except ProviderError as exc:
                    error = exc
                error.retries = retries
                error.endpoint = error.endpoint or getattr(provider, "endpoint", None)
                if not error.retryable or retries >= self.max_retries:
                    break
                retries += 1
                attempt += 1
                delay = self.delay_for(retries, error)
                yield Retrying(attempt, delay, error.short_message(), provider.name)
                await self._sleep(delay)
            can_fall_back = error.retryable or isinstance(error, _FALLBACK_ON)
            if not can_fall_back or self._active + 1 >= len(self.providers):
                raise error
            self._active += 1
            attempt += 1
            yield Retrying(attempt, 0.0, error.short_message(), self.name)


def _random() -> float:
    import random  # on a retry only: not on `session/new`'s path

    return random.random()
