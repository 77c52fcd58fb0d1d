"""Classified provider errors.

    ProviderError                  base; `.retryable`, `.retry_after`, `.status`, `.provider`
    ├── AuthError                  bad or missing key: fail fast, tell the user to fix the key
    ├── BillingError               quota / billing exhausted: fail fast
    ├── RateLimitError             429: retry (honour Retry-After)
    ├── OverloadedError            529 / "overloaded": retry
    ├── ServerError                5xx: retry
    ├── TimeoutError_              connect/read timeout, stalled stream: retry
    ├── ContextOverflowError       prompt too long: not retried, compression acts on it
    ├── PayloadTooLargeError       413
    ├── ModelNotFoundError         404 / unknown model
    ├── ContentPolicyError         refused by a safety filter
    ├── BadRequestError            any other 4xx
    └── ReplayError                a replay recording is exhausted or diverged
"""

from __future__ import annotations

from talaria.tools.errors import TalariaError


class ProviderError(TalariaError):
    retryable = False
    kind = "error"
    hint = ""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        provider: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.provider = provider

    def user_message(self) -> str:
        where = f"{self.provider}: " if self.provider else ""
        text = f"{where}{self.kind}: {self.message}"
        return f"{text}. {self.hint}" if self.hint else text


class AuthError(ProviderError):
    kind = "authentication failed"
    hint = "Check the API key (e.g. OPENAI_API_KEY / ANTHROPIC_API_KEY) or run `talaria setup`."


class BillingError(ProviderError):
    kind = "billing or quota exhausted"
    hint = "Add credit or raise the quota with the provider, or choose another model."


class RateLimitError(ProviderError):
    retryable = True
    kind = "rate limited"


class OverloadedError(ProviderError):
    retryable = True
    kind = "provider overloaded"


class ServerError(ProviderError):
    retryable = True
    kind = "provider server error"


class TimeoutError_(ProviderError):  # noqa: N801 - avoid shadowing the builtin
    retryable = True
    kind = "timed out"


class ContextOverflowError(ProviderError):
    kind = "context window exceeded"


class PayloadTooLargeError(ProviderError):
    kind = "request too large"


class ModelNotFoundError(ProviderError):
    kind = "model not found"
    hint = "Check the model name (`talaria config` shows the configured model)."


class ContentPolicyError(ProviderError):
    kind = "refused by content policy"


class BadRequestError(ProviderError):
    kind = "bad request"


class ReplayError(ProviderError):
    kind = "replay failed"
