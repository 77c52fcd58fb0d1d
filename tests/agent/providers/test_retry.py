"""Error classification and RetryingProvider: backoff, Retry-After, fallback, fail-fast."""

from __future__ import annotations

import email.utils
import time

import pytest

from talaria.agent.providers import errors
from talaria.agent.providers.anthropic import AnthropicProvider
from talaria.agent.providers.base import Finish, Retrying, TextDelta
from talaria.agent.providers.factory import create_retrying_provider
from talaria.agent.providers.openai import OpenAIProvider
from talaria.agent.providers.retry import RetryingProvider, classify_error, parse_retry_after
from tests.fakellm import collect

USER = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("status", "message", "code", "type_", "error"),
    [
        (401, "Incorrect API key", "invalid_api_key", None, errors.AuthError),
        (400, "invalid credentials", None, None, errors.BadRequestError),
        (429, "You exceeded your current quota", "insufficient_quota", None, errors.BillingError),
        (429, "Rate limit reached for tokens per min", None, None, errors.RateLimitError),
        (
            400,
            "prompt is too long: 208310 tokens > 200000 maximum",
            None,
            None,
            errors.ContextOverflowError,
        ),
        (
            400,
            "maximum context length is 8192 tokens",
            "context_length_exceeded",
            None,
            errors.ContextOverflowError,
        ),
        (400, "too many tokens in the request", None, None, errors.ContextOverflowError),
        (413, "Request exceeds the maximum size", None, None, errors.PayloadTooLargeError),
        (404, "The model `x` does not exist", "model_not_found", None, errors.ModelNotFoundError),
        (400, "unknown model 'x'", None, None, errors.ModelNotFoundError),
        (400, "flagged", "content_filter", None, errors.ContentPolicyError),
        (503, "The engine is currently overloaded", None, None, errors.OverloadedError),
        (502, "Bad gateway", None, None, errors.ServerError),
        (408, "Request timeout", None, None, errors.TimeoutError_),
        (422, "Unprocessable", None, None, errors.BadRequestError),
        (200, "Overloaded", None, "overloaded_error", errors.OverloadedError),
        (None, "boom", None, "rate_limit_error", errors.RateLimitError),
        (None, "mystery", None, None, errors.ServerError),
    ],
)
def test_classify_error(status, message, code, type_, error):
    assert type(classify_error(status, message, code=code, type_=type_)) is error


def test_parse_retry_after():
    assert parse_retry_after({"Retry-After": "3"}) == 3
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 <= parse_retry_after({"retry-after": later}) <= 30
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def openai(llm, model="primary") -> OpenAIProvider:
    return OpenAIProvider(model, api_key="k", base_url=llm.openai_base_url, name=f"openai:{model}")


def retrying(providers, delays: list[float], **kwargs) -> RetryingProvider:
    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    return RetryingProvider(providers, sleep=sleep, jitter=lambda: 1.0, **kwargs)


def text(events) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def test_retries_with_backoff_and_honours_retry_after(fake_llm):
    fake_llm.script(
        [{"fault": {"status": 429, "retry_after": 2}}, {"fault": {"status": 500}}, {"text": "ok"}]
    )
    delays: list[float] = []
    events = collect(retrying([openai(fake_llm)], delays, base_delay=0.5), USER)
    assert delays == [2.0, 1.0]  # Retry-After, then base_delay * 2**1
    retries = [e for e in events if isinstance(e, Retrying)]
    assert [(r.attempt, r.delay, r.provider) for r in retries] == [
        (1, 2.0, "openai:primary"),
        (2, 1.0, "openai:primary"),
    ]
    assert "rate limited" in retries[0].error
    assert text(events) == "ok" and events[-1] == Finish("stop")


def test_retry_after_is_capped(fake_llm):
    fake_llm.script([{"fault": {"status": 529, "retry_after": 3600}}, {"text": "ok"}])
    delays: list[float] = []
    collect(retrying([openai(fake_llm)], delays, max_retry_after=5), USER)
    assert delays == [5]


def test_backoff_grows_to_max_delay_with_jitter():
    provider = RetryingProvider([object()], base_delay=1, max_delay=5, jitter=lambda: 0.0)
    error = errors.ServerError("x")
    assert [provider.delay_for(n, error) for n in (1, 2, 3, 4, 5)] == [0.5, 1, 2, 2.5, 2.5]


def test_partial_output_is_voided_by_retrying_event(fake_llm):
    fake_llm.script(
        [{"fault": "stream_error", "after_chunks": 3, "text": "half an"}, {"text": "whole answer"}]
    )
    events = collect(retrying([openai(fake_llm)], []), USER)
    cut = next(i for i, e in enumerate(events) if isinstance(e, Retrying))
    assert text(events[:cut]) == "half an" and text(events[cut:]) == "whole answer"


def test_falls_back_after_retries_are_exhausted(fake_llm):
    fake_llm.script([{"fault": {"status": 500}}] * 3 + [{"text": "from claude"}])
    fallback = AnthropicProvider("claude-b", api_key="k", base_url=fake_llm.anthropic_base_url)
    delays: list[float] = []
    chain = retrying([openai(fake_llm), fallback], delays, max_retries=2)
    events = collect(chain, USER)
    assert len(delays) == 2
    retries = [e for e in events if isinstance(e, Retrying)]
    assert [r.provider for r in retries] == ["openai:primary"] * 2 + ["anthropic:claude-b"]
    assert [r.attempt for r in retries] == [1, 2, 3] and retries[-1].delay == 0
    assert text(events) == "from claude"
    assert [r["path"] for r in fake_llm.requests] == ["/v1/chat/completions"] * 3 + ["/v1/messages"]
    assert chain.name == "anthropic:claude-b"  # the fallback stays active
    fake_llm.script([{"text": "again"}])
    assert text(collect(chain, USER)) == "again"
    assert fake_llm.requests[-1]["path"] == "/v1/messages"


def test_auth_fails_fast_without_retries(fake_llm):
    fake_llm.script([{"fault": {"status": 401}}, {"text": "never"}])
    delays: list[float] = []
    with pytest.raises(errors.AuthError):
        collect(retrying([openai(fake_llm)], delays), USER)
    assert delays == [] and len(fake_llm.requests) == 1


def test_auth_failure_moves_to_a_fallback(fake_llm):
    fake_llm.script([{"fault": {"status": 401}}, {"text": "fallback"}])
    delays: list[float] = []
    events = collect(retrying([openai(fake_llm), openai(fake_llm, "backup")], delays), USER)
    assert delays == [] and text(events) == "fallback"
    assert fake_llm.requests[1]["json"]["model"] == "backup"


@pytest.mark.parametrize(
    ("fault", "error"),
    [("context_overflow", errors.ContextOverflowError), ({"status": 400}, errors.BadRequestError)],
)
def test_non_retryable_errors_never_fall_back(fake_llm, fault, error):
    fake_llm.script([{"fault": fault}, {"text": "never"}])
    delays: list[float] = []
    with pytest.raises(error):
        collect(retrying([openai(fake_llm), openai(fake_llm, "backup")], delays), USER)
    assert delays == [] and len(fake_llm.requests) == 1


def test_gives_up_with_the_last_error(fake_llm):
    fake_llm.script([{"fault": {"status": 503}}] * 2)
    with pytest.raises(errors.ServerError):
        collect(retrying([openai(fake_llm)], [], max_retries=1), USER)
    assert len(fake_llm.requests) == 2


def test_stall_is_retried(fake_llm):
    fake_llm.script([{"fault": "stall", "after_chunks": 2, "text": "x y"}, {"text": "fresh"}])
    primary = OpenAIProvider("m", api_key="k", base_url=fake_llm.openai_base_url, stall_timeout=0.3)
    events = collect(retrying([primary], []), USER)
    assert any(isinstance(e, Retrying) for e in events) and text(events).endswith("fresh")


def test_create_retrying_provider_skips_fallbacks_without_keys(fake_llm):
    env = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake_llm.openai_base_url}
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    chain = create_retrying_provider(
        "openai:gpt-a",
        ["anthropic:claude-b", "openai:gpt-c"],
        env=env,
        max_retries=1,
        sleep=sleep,
    )
    assert [p.name for p in chain.providers] == ["openai:gpt-a", "openai:gpt-c"]
    fake_llm.script([{"fault": {"status": 500}}] * 2 + [{"text": "from c"}])
    assert text(collect(chain, USER)) == "from c" and len(delays) == 1
    with pytest.raises(errors.AuthError):
        create_retrying_provider("anthropic:claude-b", ["openai:gpt-a"], env=env)
