"""Classified provider errors.

    ProviderError                  base; `.retryable`, `.retry_after`, `.status`, `.provider`,
    │                              `.endpoint`, `.retries`; `.cause` names the class for programs
    ├── AuthError                  bad key: fail fast, tell the user which key to fix
    │   └── NotConfiguredError     no model, no key, no base_url: nothing was sent anywhere
    ├── BillingError               quota / billing exhausted: fail fast
    ├── RateLimitError             429: retry (honour Retry-After)
    ├── OverloadedError            529 / "overloaded": retry
    ├── ServerError                5xx: retry
    ├── TimeoutError_              read timeout, stalled stream: retry
    │   └── UnreachableError       the connection failed (refused, DNS, TLS): retry
    ├── ContextOverflowError       prompt too long: not retried, compression acts on it
    ├── PayloadTooLargeError       413
    ├── ModelNotFoundError         404 / unknown model
    ├── ContentPolicyError         refused by a safety filter
    ├── BadRequestError            any other 4xx
    └── ReplayError                a replay recording is exhausted or diverged

`user_message()` is the one line a person reads (`talaria run`, an editor's error notice): who
failed (model and endpoint), what happened, the provider's own words, and what to do, each once.
`to_data()` is the same, classified, for the ACP `data` of a -32050 model error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from talaria.tools.errors import TalariaError


def settings(provider: str) -> tuple[str, str]:
    """(the key setting, the endpoint setting) for a `provider:model` name, as a user sets them."""
    prefix = provider.partition(":")[0]
    if prefix in ("openai", "anthropic"):
        return f"{prefix.upper()}_API_KEY", f"{prefix.upper()}_BASE_URL"
    return (f"the key named by api_key_env in [providers.{prefix}]",
            f"base_url in [providers.{prefix}]")



class ProviderError(TalariaError):
    retryable = False
    cause = "error"
    kind = "error"
    hint = ""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        provider: str = "",
        endpoint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.provider = provider
        self.endpoint = endpoint
        self.retries = 0
        """Retries made before giving up (set by RetryingProvider)."""

    def advice(self) -> str:
        """What to do about it, in a sentence (may name the setting involved)."""
        return self.hint

    def short_message(self) -> str:
        """Who failed and how, without advice: for a notice that a retry follows."""
        who = self.provider + (f" at {self.endpoint}" if self.endpoint else "")
        return ": ".join(part for part in (who, self.kind, self.message.rstrip(". ")) if part)

    def user_message(self) -> str:
        """The whole story on one line: who, what (after how many retries), what to do."""
        who = self.provider + (f" at {self.endpoint}" if self.endpoint else "")
        what = self.kind
        if self.retries:
            what += f" after {self.retries} {'retry' if self.retries == 1 else 'retries'}"
        text = ": ".join(part for part in (who, what, self.message.rstrip(". ")) if part)
        advice = self.advice()
        return f"{text}. {advice}" if advice else text

    def to_data(self) -> dict[str, Any]:
        """The classified failure for a protocol error's `data`."""
        data: dict[str, Any] = {"cause": self.cause, "provider": self.provider.partition(":")[0],
                                "model": self.provider, "endpoint": self.endpoint,
                                "retries": self.retries, "status": self.status,
                                "detail": self.message}
        if self.retry_after is not None:
            data["retryAfter"] = self.retry_after
        return {k: v for k, v in data.items() if v is not None and v != ""}


class AuthError(ProviderError):
    cause = "auth"
    kind = "authentication failed"

    def advice(self) -> str:
        return f"Check {settings(self.provider)[0]}, or run `talaria setup`."


class NotConfiguredError(AuthError):
    """The message says what to set; nothing was sent to any endpoint."""

    cause = "not_configured"
    kind = ""

    def advice(self) -> str:
        return ""


class BillingError(ProviderError):
    cause = "billing"
    kind = "billing or quota exhausted"
    hint = "Add credit or raise the quota with the provider, or choose another model."


class RateLimitError(ProviderError):
    retryable = True
    cause = "rate_limited"
    kind = "rate limited"
    hint = "Wait a minute and try again, or choose another model."


class OverloadedError(ProviderError):
    retryable = True
    cause = "overloaded"
    kind = "provider overloaded"
    hint = "Try again in a few minutes, or choose another model."


class ServerError(ProviderError):
    retryable = True
    cause = "server_error"
    kind = "provider server error"
    hint = "Try again; if it keeps failing, check the provider's status page."


class TimeoutError_(ProviderError):  # noqa: N801 - avoid shadowing the builtin
    retryable = True
    cause = "timeout"
    kind = "timed out"
    hint = "Try again; if it keeps happening, check the network and the endpoint."


class UnreachableError(TimeoutError_):
    cause = "unreachable"
    kind = "cannot connect"

    def advice(self) -> str:
        server = f"the server at {self.endpoint}" if self.endpoint else "the server"
        return f"Check the network and that {server} is running, or fix {settings(self.provider)[1]}."


class ContextOverflowError(ProviderError):
    """`.limit` and `.prompt`: the window and the prompt's size the provider's error states
    (`limits.overflow_numbers`), None when it does not say."""

    cause = "context_overflow"
    kind = "context window exceeded"
    hint = ("The conversation does not fit the model even after compaction: start a new "
            "session, attach less, or choose a model with a larger context window.")

    def __init__(self, message: str, *, details: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        # Imported by the first overflow, not with the errors every session's opening imports.
        from talaria.agent.providers.limits import overflow_numbers

        numbers = overflow_numbers(message, details)
        self.limit, self.prompt = numbers.limit, numbers.prompt

    def to_data(self) -> dict[str, Any]:
        data = super().to_data()
        if self.limit is not None:
            data["limit"] = self.limit
        if self.prompt is not None:
            data["promptTokens"] = self.prompt
        return data


class PayloadTooLargeError(ProviderError):
    cause = "payload_too_large"
    kind = "request too large"
    hint = "Attach less (fewer or smaller files and images)."


class ModelNotFoundError(ProviderError):
    cause = "model_not_found"
    kind = "model not found"
    hint = "Check the model name (`talaria config` shows the configured model)."


class ContentPolicyError(ProviderError):
    cause = "content_policy"
    kind = "refused by content policy"
    hint = "Rephrase the request."


class BadRequestError(ProviderError):
    cause = "bad_request"
    kind = "bad request"


class ReplayError(ProviderError):
    cause = "replay"
    kind = "replay failed"
