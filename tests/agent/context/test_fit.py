"""A server with a smaller window than Talaria assumed: the loop learns the window from the
refusal, compacts to fit, retries once; when nothing can shrink, the turn ends with the
numbers (issue 23, item 11). The fake LLM refuses the way each server does (tests/fakewindow)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from benchmarks.synthetic import TemplateSummarizer, tool_heavy_session
from talaria.agent import commands
from talaria.agent.config import load_config
from talaria.agent.context import fit, tokens
from talaria.agent.loop import run_turn
from talaria.agent.providers.errors import ContextOverflowError
from tests.fakewindow import STYLES, prompt_tokens, refusal, small_window
from tests.helpers import make_session, recorded

WINDOW = 8192


def model_for(style: str) -> str:
    return "anthropic:fake-model" if style.startswith("anthropic") else "openai:fake-model"


def fits(style: str, request: dict) -> bool:
    body = request["json"]
    answer = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
    return refusal(style, WINDOW, prompt_tokens(body), answer) is None


@pytest.mark.parametrize("style", ["openai", "vllm", "anthropic-max-tokens", "tgi"])
def test_a_short_prompt_refused_for_its_max_tokens_is_retried_with_less(
        fake_llm, tmp_path: Path, style: str) -> None:
    """The issue's case: system prompt + tools + "hi" are ~2,300 tokens, but the default
    max_tokens (8,192) is the whole window of a server that counts prompt + answer."""
    session = make_session(fake_llm, tmp_path, model=model_for(style))
    assert session.context_window == 128_000 and session.max_tokens == WINDOW
    small_window(fake_llm, WINDOW, style)
    fake_llm.script([{"text": "hello"}, {"text": "again"}])
    events = recorded(session)
    assert anyio.run(run_turn, session, "hi") == "end_turn"
    refused, retried = fake_llm.requests
    assert not fits(style, refused) and fits(style, retried)
    assert session.context_window == WINDOW and session.token_ratio > 1.0
    assert not events.of("Compacted"), "nothing needed compacting"
    assert any("8,192 tokens" in n.text for n in events.of("Notice"))
    assert events.of("UsageUpdated")[-1].size == WINDOW  # what usage reports show
    # The next turn asks for no more than fits: no refusal first.
    assert anyio.run(run_turn, session, "and now?") == "end_turn"
    assert len(fake_llm.requests) == 3 and fits(style, fake_llm.requests[-1])
    config = load_config({}, env={"TALARIA_HOME": str(tmp_path / ".home")})
    anyio.run(commands.run, session, config, "context", "")
    said = events.events[-1]
    assert f"of {WINDOW:,} tokens" in said.text  # /context reports the learned window


@pytest.mark.parametrize("style", STYLES)
def test_a_long_session_is_compacted_to_the_window_the_server_names(
        fake_llm, tmp_path: Path, style: str) -> None:
    session = make_session(fake_llm, tmp_path, model=model_for(style))
    session.summarizer = TemplateSummarizer()
    for message in tool_heavy_session(30_000)[1:]:
        session.append(message)
    small_window(fake_llm, WINDOW, style)
    fake_llm.script([{"text": "carrying on"}])
    events = recorded(session)
    assert anyio.run(run_turn, session, "go on") == "end_turn"
    refused, retried = fake_llm.requests
    assert not fits(style, refused) and fits(style, retried)
    [compacted] = events.of("Compacted")
    assert compacted.applied and compacted.after < WINDOW
    # Compacted with the answer's share of the window to spare, as the server counts.
    assert prompt_tokens(retried["json"]) <= WINDOW * (1 - fit.ANSWER_SHARE)
    assert session.context_window == WINDOW
    assert session.messages[-1]["content"] == "carrying on"


def test_when_nothing_can_shrink_the_turn_ends_with_the_numbers(fake_llm, tmp_path: Path) -> None:
    """The system prompt and the tools alone are more than the window: one retry at most,
    then an error naming what was sent, the limit, and the settings."""
    session = make_session(fake_llm, tmp_path)
    small_window(fake_llm, 1024, "llamacpp")  # the system prompt and tools take ~2,000
    events = recorded(session)
    with pytest.raises(ContextOverflowError) as caught:
        anyio.run(run_turn, session, "hi")
    error = caught.value
    sent = prompt_tokens(fake_llm.requests[0]["json"])
    text = error.user_message()
    assert f"{sent:,} tokens were sent and the window is 1,024 (its error says)" in text
    assert "system prompt and tool definitions alone take" in text
    assert "TALARIA_MODEL" in text and "context_window" in text and "llama.cpp -c" in text
    assert error.limit == 1024 and error.prompt == sent
    assert len(fake_llm.requests) == 1, "no retry that cannot fit"
    assert session.context_window == 1024
    assert not events.of("Compacted"), "no compaction is tried where none can help"


def test_a_second_refusal_ends_the_turn(fake_llm, tmp_path: Path) -> None:
    """A server whose count is far from its own error's (a misread number is not used): the
    retry is refused too, and that ends the turn, with the numbers."""
    session = make_session(fake_llm, tmp_path)
    overflow = {"fault": {"status": 400, "message": "This model's maximum context length is "
                          "8192 tokens. However, your messages resulted in 9000 tokens.",
                          "code": "context_length_exceeded"}}
    fake_llm.script([overflow, overflow, {"text": "never asked"}])
    with pytest.raises(ContextOverflowError, match="9,000 tokens were sent and the window is 8,192"):
        anyio.run(run_turn, session, "hi")
    assert len(fake_llm.requests) == 2
    assert session.token_ratio == fit.TOKENIZER_MARGIN  # 9000 is not this prompt's count


def test_answer_room_is_bounded_below(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    async def exact() -> int:
        return tokens.count_messages(session.messages, session.tool_definitions())

    session.context_window = anyio.run(exact) + 50  # the system prompt and tools all but fill it
    room = anyio.run(fit.answer_room, session, 10**6, exact)
    assert room == fit.MIN_ANSWER  # the window is all but used: the call asks for the least
    session.context_window = 128_000
    assert anyio.run(fit.answer_room, session, 1000, exact) == session.max_tokens


def test_a_refusal_without_numbers_compacts_and_never_invents_a_window(
        fake_llm, tmp_path: Path) -> None:
    """Bedrock and Ollama say "too long" without a number: the context is compacted below what
    was sent and retried; the window is not changed; nothing to shrink says so plainly."""
    session = make_session(fake_llm, tmp_path)
    session.summarizer = TemplateSummarizer()
    for message in tool_heavy_session(30_000)[1:]:
        session.append(message)
    vague = {"fault": {"status": 400, "message": "Input is too long for requested model."}}
    fake_llm.script([vague, {"text": "done"}])
    assert anyio.run(run_turn, session, "go on") == "end_turn"
    assert session.context_window == 128_000 and len(fake_llm.requests) == 2
    assert prompt_tokens(fake_llm.requests[1]["json"]) < prompt_tokens(fake_llm.requests[0]["json"]) / 2
    fresh = make_session(fake_llm, tmp_path)
    fake_llm.script([vague])
    with pytest.raises(ContextOverflowError, match="without saying its limit"):
        anyio.run(run_turn, fresh, "hi")
