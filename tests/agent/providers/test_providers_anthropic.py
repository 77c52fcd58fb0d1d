"""AnthropicProvider through the real `anthropic` SDK against the fake server."""

from __future__ import annotations

import pytest

from talaria.agent.providers import errors
from talaria.agent.providers.anthropic import AnthropicProvider
from talaria.agent.providers.base import Finish, ReasoningDelta, TextDelta, ToolCallRequest, Usage
from talaria.agent.providers.factory import create_provider, has_credentials
from tests.fakellm import collect

READ = {
    "name": "read_file",
    "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
}
USER = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
EPHEMERAL = {"type": "ephemeral"}


def provider(llm, **kwargs) -> AnthropicProvider:
    return AnthropicProvider(
        "claude-test", api_key="sk-ant", base_url=llm.anthropic_base_url, **kwargs
    )


def failure(llm, **kwargs) -> errors.ProviderError:
    with pytest.raises(errors.ProviderError) as caught:
        collect(provider(llm, **kwargs), USER, [READ])
    return caught.value


def test_streams_thinking_text_tool_calls_and_usage(fake_llm):
    usage = {"input_tokens": 5000, "output_tokens": 90, "cache_read_tokens": 4000}
    fake_llm.script(
        [
            {
                "reasoning": "Two files to read.",
                "signature": "EqQBCkYIARgCIkB",
                "text": "Reading them.",
                "tool_calls": [
                    {"id": "toolu_1", "name": "read_file", "arguments": {"path": "a.py"}},
                    {"id": "toolu_2", "name": "read_file", "arguments": {"path": "b.py"}},
                ],
                "usage": {**usage, "cache_write_tokens": 500, "reasoning_tokens": 12},
            }
        ]
    )
    events = collect(provider(fake_llm, thinking_budget=2048), USER, [READ])
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "Two files to read."
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Reading them."
    assert [e for e in events if isinstance(e, ToolCallRequest)] == [
        ToolCallRequest("toolu_1", "read_file", '{"path": "a.py"}'),
        ToolCallRequest("toolu_2", "read_file", '{"path": "b.py"}'),
    ]
    assert events[-2] == Usage(**usage, cache_write_tokens=500, reasoning_tokens=12)
    thinking = {
        "type": "thinking",
        "thinking": "Two files to read.",
        "signature": "EqQBCkYIARgCIkB",
    }
    assert events[-1] == Finish("tool_calls", {"thinking_blocks": [thinking]})
    sent = fake_llm.requests[0]["json"]
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert sent["max_tokens"] > 2048 and sent["stream"] is True
    assert sent["tools"][0]["input_schema"] == READ["parameters"]


def test_thinking_blocks_round_trip_with_cache_breakpoints(fake_llm):
    fake_llm.script([{"text": "done"}])
    thinking = [
        {"type": "thinking", "thinking": "plan", "signature": "sig-A"},
        {"type": "redacted_thinking", "data": "opaque"},
    ]
    history = [
        *USER,
        {
            "role": "assistant",
            "content": "Reading.",
            "thinking_blocks": thinking,
            "tool_calls": [
                {"id": "t1", "name": "read_file", "arguments": '{"path": "a"}'},
                {"id": "t2", "name": "read_file", "arguments": '{"path": "b"}'},
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "name": "read_file", "content": "A"},
        {"role": "tool", "tool_call_id": "t2", "name": "read_file", "content": "B"},
        {"role": "assistant", "content": "Both read."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "and this?"},
                {"type": "image", "mime_type": "image/png", "data": "iVBORw0KGgo="},
            ],
        },
    ]
    collect(provider(fake_llm), history, [READ])
    sent = fake_llm.requests[0]["json"]
    assert sent["system"] == [{"type": "text", "text": "be brief", "cache_control": EPHEMERAL}]
    messages = sent["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[1]["content"] == [
        *thinking,  # first, verbatim, signatures intact
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a"}},
        {"type": "tool_use", "id": "t2", "name": "read_file", "input": {"path": "b"}},
    ]
    # Both tool results in one user message; the cache breakpoint sits on its last block.
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "A"},
        {"type": "tool_result", "tool_use_id": "t2", "content": "B", "cache_control": EPHEMERAL},
    ]
    image = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
    assert messages[4]["content"][-1] == {
        "type": "image",
        "source": image,
        "cache_control": EPHEMERAL,
    }
    assert "cache_control" not in messages[0]["content"][-1]  # only the last two user turns
    assert history[2]["thinking_blocks"] == thinking  # the caller's history is untouched


def test_redacted_thinking_is_kept(fake_llm):
    fake_llm.script([{"redacted_thinking": "ENCRYPTED", "text": "ok"}])
    finish = collect(provider(fake_llm), USER)[-1]
    assert finish.extras == {
        "thinking_blocks": [{"type": "redacted_thinking", "data": "ENCRYPTED"}]
    }


@pytest.mark.parametrize(
    ("finish", "expected"), [("length", "length"), ("refusal", "refusal"), ("stop", "stop")]
)
def test_stop_reasons_are_normalised(fake_llm, finish, expected):
    fake_llm.script([{"text": "x", "finish": finish}])
    assert collect(provider(fake_llm), USER)[-1] == Finish(expected)


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ({"status": 401}, errors.AuthError),
        ({"status": 402}, errors.BillingError),
        ({"status": 400, "message": "Your credit balance is too low"}, errors.BillingError),
        ({"status": 404}, errors.ModelNotFoundError),
        ({"status": 413}, errors.PayloadTooLargeError),
        ({"status": 400}, errors.BadRequestError),
        ({"status": 429}, errors.RateLimitError),
        ({"status": 500}, errors.ServerError),
        ({"status": 529}, errors.OverloadedError),
        ("context_overflow", errors.ContextOverflowError),
        ("malformed", errors.ServerError),
        ("disconnect", errors.TimeoutError_),
        ("stream_error", errors.OverloadedError),
    ],
)
def test_faults_are_classified(fake_llm, fault, error):
    fake_llm.script([{"fault": fault, "after_chunks": 3, "text": "some partial output"}])
    caught = failure(fake_llm)
    assert type(caught) is error
    assert caught.provider == "anthropic:claude-test"
    assert len(fake_llm.requests) == 1  # the SDK's own retries are off


def test_retry_after_http_date(fake_llm):
    fake_llm.script([{"fault": {"status": 429, "retry_after": "Wed, 21 Oct 2015 07:28:00 GMT"}}])
    assert failure(fake_llm).retry_after == 0  # a date in the past: retry now


def test_stalled_stream_times_out(fake_llm):
    fake_llm.script([{"fault": "stall", "after_chunks": 4, "text": "one two three"}])
    caught = failure(fake_llm, stall_timeout=0.3)
    assert isinstance(caught, errors.TimeoutError_) and "stalled" in caught.message


def test_factory_reads_anthropic_environment(fake_llm):
    env = {"ANTHROPIC_API_KEY": "sk-ant-env", "ANTHROPIC_BASE_URL": fake_llm.anthropic_base_url}
    assert has_credentials("anthropic:claude-test-4", env=env)
    assert not has_credentials("claude-test-4", env={})
    made = create_provider("claude-test-4", env=env, thinking_budget=1024, max_tokens=4000)
    assert made.name == "anthropic:claude-test-4"
    fake_llm.script([{"text": "hello"}])
    collect(made, USER)
    request = fake_llm.requests[0]
    assert "sk-ant-env" in request["headers"].get("x-api-key", request["headers"]["authorization"])
    assert (
        request["json"]["max_tokens"] == 4000
        and request["json"]["thinking"]["budget_tokens"] == 1024
    )
    with pytest.raises(errors.AuthError, match="ANTHROPIC_API_KEY"):
        create_provider("anthropic:claude-test-4", env={})
