"""OpenAIProvider through the real `openai` SDK against the fake server; factory parsing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from talaria.agent.providers import errors
from talaria.agent.providers.base import Finish, ReasoningDelta, TextDelta, ToolCallRequest, Usage
from talaria.agent.providers.factory import create_provider, has_credentials, split_model
from talaria.agent.providers.openai import OpenAIProvider
from tests import ROOT
from tests.fakellm import collect

READ = {
    "name": "read_file",
    "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
}
USER = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


def provider(llm, **kwargs) -> OpenAIProvider:
    return OpenAIProvider("gpt-test", api_key="sk-test", base_url=llm.openai_base_url, **kwargs)


def failure(llm, **kwargs) -> errors.ProviderError:
    with pytest.raises(errors.ProviderError) as caught:
        collect(provider(llm, **kwargs), USER, [READ])
    return caught.value


def test_streams_text_reasoning_tool_calls_and_usage(fake_llm):
    usage = {"input_tokens": 1200, "output_tokens": 80, "cache_read_tokens": 1024}
    fake_llm.script(
        [
            {
                "reasoning": "The user wants two files read.",
                "text": "Reading both files now.",
                "tool_calls": [
                    {"id": "call_a", "name": "read_file", "arguments": {"path": "a.py"}},
                    {"name": "read_file", "arguments": {"path": "dir/b.py"}},
                ],
                "usage": {**usage, "reasoning_tokens": 30},
            }
        ]
    )
    events = collect(provider(fake_llm), USER, [READ], max_tokens=500)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Reading both files now."
    assert len([e for e in events if isinstance(e, TextDelta)]) > 1
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert reasoning == "The user wants two files read."
    calls = [e for e in events if isinstance(e, ToolCallRequest)]
    assert calls == [
        ToolCallRequest("call_a", "read_file", '{"path": "a.py"}'),
        ToolCallRequest("call_1_1", "read_file", '{"path": "dir/b.py"}'),
    ]
    assert events[-2:] == [Usage(**usage, reasoning_tokens=30), Finish("tool_calls")]
    sent = fake_llm.requests[0]["json"]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert sent["max_completion_tokens"] == 500 and "max_tokens" not in sent
    assert sent["tools"] == [{"type": "function", "function": READ}]


def test_translates_history_to_chat_completions(fake_llm):
    fake_llm.script([{"text": "ok"}])
    history = [
        *USER[:1],
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image", "mime_type": "image/png", "data": "iVBORw0KGgo="},
            ],
        },
        {
            "role": "assistant",
            "content": "",
            "reasoning": "look at it",
            "thinking_blocks": None,
            "tool_calls": [{"id": "c1", "name": "read_file", "arguments": '{"path": "x"}'}],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "read_file", "content": "data"},
    ]
    collect(provider(fake_llm), history, [READ])
    sent = fake_llm.requests[0]["json"]["messages"]
    assert sent[1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
    }
    # No reasoning, no thinking_blocks: OpenAI rejects unknown message fields.
    assert sent[2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "x"}'},
            }
        ],
    }
    assert sent[3] == {"role": "tool", "tool_call_id": "c1", "content": "data"}


def test_compatible_servers_get_reasoning_back_and_max_tokens(fake_llm):
    fake_llm.script([{"text": "ok"}])
    history = [*USER, {"role": "assistant", "content": "hm", "reasoning": "thought"}]
    collect(provider(fake_llm, compat=True), [*history, USER[1]], [], max_tokens=64)
    sent = fake_llm.requests[0]["json"]
    assert sent["messages"][2]["reasoning_content"] == "thought"
    assert sent["max_tokens"] == 64 and "tools" not in sent


@pytest.mark.parametrize(("finish", "expected"), [("length", "length"), ("refusal", "refusal")])
def test_finish_reasons_are_normalised(fake_llm, finish, expected):
    fake_llm.script([{"text": "partial", "finish": finish}])
    assert collect(provider(fake_llm), USER)[-1] == Finish(expected)


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ({"status": 401}, errors.AuthError),
        ({"status": 403}, errors.AuthError),
        ({"status": 402}, errors.BillingError),
        ({"status": 429, "code": "insufficient_quota"}, errors.BillingError),
        ({"status": 404}, errors.ModelNotFoundError),
        ({"status": 413}, errors.PayloadTooLargeError),
        ({"status": 400}, errors.BadRequestError),
        (
            {"status": 400, "code": "content_filter", "message": "flagged"},
            errors.ContentPolicyError,
        ),
        ({"status": 500}, errors.ServerError),
        ({"status": 503}, errors.ServerError),
        ({"status": 529}, errors.OverloadedError),
        ("context_overflow", errors.ContextOverflowError),
        ("malformed", errors.ServerError),
        ("disconnect", errors.TimeoutError_),
    ],
)
def test_faults_are_classified(fake_llm, fault, error):
    fake_llm.script([{"fault": fault, "text": "some partial output"}])
    caught = failure(fake_llm)
    assert type(caught) is error
    assert caught.provider == "openai:gpt-test"
    assert len(fake_llm.requests) == 1  # the SDK's own retries are off


def test_rate_limit_carries_retry_after(fake_llm):
    fake_llm.script([{"fault": {"status": 429, "retry_after": 7}}])
    caught = failure(fake_llm)
    assert isinstance(caught, errors.RateLimitError) and caught.retry_after == 7
    fake_llm.script([{"fault": {"status": 429, "retry_after_ms": 1500}}])
    assert failure(fake_llm).retry_after == 1.5


def test_error_chunk_mid_stream_is_classified(fake_llm):
    fake_llm.script([{"fault": "stream_error", "after_chunks": 2, "text": "a b c"}])
    assert isinstance(failure(fake_llm), errors.OverloadedError)
    fake_llm.script([{"fault": "stream_error", "error_type": "server_error"}])
    assert isinstance(failure(fake_llm), errors.ServerError)


def test_stalled_stream_times_out(fake_llm):
    fake_llm.script([{"fault": "stall", "after_chunks": 2, "text": "one two three"}])
    caught = failure(fake_llm, stall_timeout=0.3)
    assert isinstance(caught, errors.TimeoutError_) and "stalled" in caught.message


def test_unreachable_server_is_a_retryable_timeout():
    dead = OpenAIProvider("m", api_key="k", base_url="http://127.0.0.1:9/v1", timeout=2)
    with pytest.raises(errors.TimeoutError_):
        collect(dead, USER)


# -- factory ---------------------------------------------------------------------------


def test_split_model():
    assert split_model("openai:gpt-4.1") == ("openai", "gpt-4.1")
    assert split_model("ollama:qwen3:8b") == ("ollama", "qwen3:8b")
    assert split_model("claude-sonnet-4-5") == ("anthropic", "claude-sonnet-4-5")
    assert split_model("gpt-4.1") == ("openai", "gpt-4.1")


def test_factory_reads_openai_environment(fake_llm):
    env = {"OPENAI_API_KEY": "sk-env", "OPENAI_BASE_URL": fake_llm.openai_base_url}
    fake_llm.script([{"text": "hello"}])
    made = create_provider("openai:gpt-4.1", env=env, stall_timeout=5, thinking_budget=2048)
    assert made.name == "openai:gpt-4.1"
    assert collect(made, USER)[-1] == Finish("stop")
    assert fake_llm.requests[0]["headers"]["authorization"] == "Bearer sk-env"


def test_missing_key_tells_the_user_what_to_set():
    with pytest.raises(errors.AuthError, match="OPENAI_API_KEY.*talaria setup"):
        create_provider("openai:gpt-4.1", env={})
    assert not has_credentials("openai:gpt-4.1", env={})
    assert has_credentials("openai:gpt-4.1", env={"OPENAI_API_KEY": "x"})
    with pytest.raises(errors.AuthError, match="OPENROUTER_API_KEY"):
        create_provider("openrouter:qwen/qwen3-coder", env={})


def test_named_endpoints(fake_llm):
    assert has_credentials("ollama:llama3", env={})  # local, no key needed
    ollama = create_provider("ollama:llama3", env={})
    assert ollama.name == "ollama:llama3" and ollama.compat
    assert not has_credentials("vllm:qwen", env={})  # needs a base_url
    with pytest.raises(errors.NotConfiguredError, match="base_url"):
        create_provider("vllm:qwen", env={})
    with pytest.raises(errors.ModelNotFoundError, match="unknown provider"):
        create_provider("nope:model", env={})
    tables = {"vllm": {"base_url": fake_llm.openai_base_url, "api_key_env": "VLLM_KEY"}}
    fake_llm.script([{"text": "served by vllm"}])
    vllm = create_provider("vllm:qwen", providers=tables, env={"VLLM_KEY": "secret"})
    assert "".join(e.text for e in collect(vllm, USER) if isinstance(e, TextDelta)) == (
        "served by vllm"
    )
    assert fake_llm.requests[0]["json"]["model"] == "qwen"
    assert fake_llm.requests[0]["headers"]["authorization"] == "Bearer secret"


def test_unknown_option_is_a_type_error():
    with pytest.raises(TypeError):
        create_provider("ollama:x", env={}, temprature=0.2)


def test_importing_providers_loads_no_sdk(tmp_path):
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"turns": [{"text": "hi"}]}))
    code = (
        "import sys, talaria.agent.providers as p\n"
        f"p.create_provider('replay:{scenario}')\n"
        "p.has_credentials('openai:gpt-4.1'); p.has_credentials('anthropic:claude-x')\n"
        "print(sorted(m for m in ('openai', 'anthropic', 'httpx2') if m in sys.modules))\n"
        "p.create_provider('openai:gpt-4.1', env={'OPENAI_API_KEY': 'k'})\n"
        "print('openai' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    # Even a built provider waits for its first call to import the SDK (startup budget).
    assert out.stdout.split("\n")[:2] == ["[]", "False"]


def test_fake_server_serves_a_separate_process(fake_llm):
    fake_llm.script(
        [{"text": "from another process", "tool_calls": [{"name": "ls", "arguments": {}}]}]
    )
    code = (
        "import sys, openai\n"
        "client = openai.OpenAI(api_key='k', base_url=sys.argv[1], max_retries=0)\n"
        "stream = client.chat.completions.create(model='m', messages=[{'role': 'user',"
        " 'content': 'hi'}], stream=True)\n"
        "chunks = list(stream)\n"
        "print(''.join(c.choices[0].delta.content or '' for c in chunks if c.choices))\n"
        "print(chunks[-1].choices[0].finish_reason)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, fake_llm.openai_base_url],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert out.stdout.split("\n")[:2] == ["from another process", "tool_calls"]


def test_empty_script_answers_500_or_the_default_turn(fake_llm):
    with pytest.raises(errors.ServerError, match="fake LLM script exhausted"):
        collect(provider(fake_llm), USER)
    fake_llm.default_turn = {"text": "default"}
    assert collect(provider(fake_llm), USER)[-1] == Finish("stop")
    assert fake_llm.remaining == 0 and fake_llm.served == 1
