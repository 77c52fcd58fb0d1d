"""Cost and tokens through a real `talaria acp` (issue 27 point 1): `usage_update.cost` is the
session's cumulative cost from the one price table (`agent/pricing.py`), absent for a model
without a price; `PromptResponse.usage` (unstable) sums the turn's calls as the providers
reported them, in OpenAI's and Anthropic's stream formats. Every message is held to the
unstable schema by the harness and parsed again by the official SDK's models."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from acp.schema import PromptResponse, UsageUpdate

from tests.acp_harness import Editor

PER = 1_000_000
GPT_4O = {"input": 2.50, "cached": 1.25, "output": 10.0}  # list price, $ per million tokens
SONNET = {"input": 3.0, "cached": 0.30, "write": 3.75, "output": 15.0}


def usage(prompt: int, output: int, cached: int = 0, written: int = 0) -> dict[str, int]:
    return {"input_tokens": prompt, "output_tokens": output, "cache_read_tokens": cached,
            "cache_write_tokens": written}


def gpt_4o(prompt: int, output: int, cached: int = 0) -> float:
    return ((prompt - cached) * GPT_4O["input"] + cached * GPT_4O["cached"]
            + output * GPT_4O["output"]) / PER


def read_call(path: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "read_file", "arguments": {"path": path}}]}


def costs(ed: Editor, sid: str) -> list[float | None]:
    """The cost of each `usage_update`, parsed by the SDK (None: no cost sent)."""
    parsed = [UsageUpdate.model_validate(u) for u in ed.updates(sid, "usage_update")]
    return [u.cost.amount if u.cost is not None else None for u in parsed]


def check_cost_fields(ed: Editor, sid: str) -> None:
    for update in ed.updates(sid, "usage_update"):
        if "cost" in update:
            assert update["cost"]["currency"] == "USD" and set(update["cost"]) == {"amount", "currency"}


def test_a_priced_model_sends_the_sessions_cost_and_each_turns_tokens(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([
        {**read_call("a.txt"), "usage": usage(1000, 50, cached=400)},
        {"text": "It says hello.", "usage": usage(1200, 20, cached=1000)},
        {"text": "Still hello.", "usage": usage(1300, 10, cached=1100)},
    ])
    with Editor(tmp_path, fake_llm, unstable=True, env={"TALARIA_MODEL": "openai:gpt-4o"}) as ed:
        (ed.project / "a.txt").write_text("hello\n")
        ed.initialize()
        sid = ed.new_session()
        first = ed.prompt(sid, "What does a.txt say?")
        second = ed.prompt(sid, "And now?")
        check_cost_fields(ed, sid)
        sent = costs(ed, sid)
        used = [u["used"] for u in ed.updates(sid, "usage_update")]
    call1, call2, call3 = gpt_4o(1000, 50, 400), gpt_4o(1200, 20, 1000), gpt_4o(1300, 10, 1100)
    assert sent == pytest.approx([call1, call1 + call2, call1 + call2 + call3], abs=1e-6)
    assert used == [1050, 1220, 1310]  # the prompt (cached part included) and the answer
    assert first["stopReason"] == "end_turn"
    assert first["usage"] == {"totalTokens": 2270, "inputTokens": 2200, "outputTokens": 70,
                              "thoughtTokens": 0, "cachedReadTokens": 1400, "cachedWriteTokens": 0}
    parsed = PromptResponse.model_validate(second).usage  # the SDK reads the same names
    assert parsed is not None
    assert (parsed.input_tokens, parsed.output_tokens, parsed.total_tokens,
            parsed.cached_read_tokens) == (1300, 10, 1310, 1100)  # this turn's only


def test_anthropics_stream_is_counted_and_priced_with_its_cache_writes(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"text": "Hi.", "usage": {**usage(2000, 40, cached=1500, written=300),
                                                "reasoning_tokens": 12}}])
    env = {"TALARIA_MODEL": "anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY": "x",
           "ANTHROPIC_BASE_URL": fake_llm.anthropic_base_url}
    with Editor(tmp_path, fake_llm, unstable=True, env=env) as ed:
        ed.initialize()
        sid = ed.new_session()
        answer = ed.prompt(sid, "hi")
        sent = costs(ed, sid)
    assert fake_llm.requests[0]["path"].endswith("/messages")
    expected = (200 * SONNET["input"] + 1500 * SONNET["cached"] + 300 * SONNET["write"]
                + 40 * SONNET["output"]) / PER
    assert sent == pytest.approx([expected], abs=1e-6)
    assert answer["usage"] == {"totalTokens": 2040, "inputTokens": 2000, "outputTokens": 40,
                               "thoughtTokens": 12, "cachedReadTokens": 1500,
                               "cachedWriteTokens": 300}


def test_a_model_without_a_price_sends_tokens_but_no_cost(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{**read_call("a.txt"), "usage": usage(900, 30)},
                     {"text": "Done.", "usage": usage(1000, 5)}])
    with Editor(tmp_path, fake_llm, unstable=True) as ed:  # openai:fake: in no price table
        (ed.project / "a.txt").write_text("x\n")
        ed.initialize()
        sid = ed.new_session()
        answer = ed.prompt(sid, "read it")
        updates = ed.updates(sid, "usage_update")
    assert len(updates) == 2 and all("cost" not in u for u in updates)
    assert answer["usage"]["inputTokens"] == 1900 and answer["usage"]["outputTokens"] == 35


def test_a_configured_price_is_used_and_a_loaded_session_goes_on_from_its_total(
        tmp_path: Path, fake_llm) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[prices."openai:fake"]\ninput = 1.0\noutput = 2.0\n')
    fake_llm.script([{"text": "One.", "usage": usage(1000, 100)},
                     {"text": "Two.", "usage": usage(2000, 200)}])
    with Editor(tmp_path, fake_llm, unstable=True, home=home) as ed:
        ed.initialize()
        sid = ed.new_session()
        ed.prompt(sid, "one")
        before = costs(ed, sid)
    with Editor(tmp_path, fake_llm, unstable=True, home=home) as ed:  # a new process
        ed.initialize()
        ed.request("session/load", {"sessionId": sid, "cwd": str(ed.project), "mcpServers": []})
        answer = ed.prompt(sid, "two")
        after = costs(ed, sid)
    assert before == pytest.approx([(1000 * 1.0 + 100 * 2.0) / PER])
    assert after == pytest.approx([(1200 + 2400) / PER])  # cumulative across the load
    assert answer["usage"]["inputTokens"] == 2000  # the turn's own


def test_a_subagents_calls_are_in_its_parents_turn_and_cost(tmp_path: Path, fake_llm) -> None:
    def child(body: dict[str, Any]) -> dict[str, Any] | None:
        first = next((m for m in body["messages"] if m["role"] == "user"), None)
        if first is None or not re.match(r"goal:", str(first["content"])):
            return None
        return {"text": "Child done.", "usage": usage(500, 25, cached=100)}

    fake_llm.respond = child
    fake_llm.script([
        {"tool_calls": [{"name": "delegate_task", "arguments": {"tasks": [{"goal": "goal:look"}]}}],
         "usage": usage(1000, 40)},
        {"text": "Parent done.", "usage": usage(1500, 10)},
    ])
    with Editor(tmp_path, fake_llm, unstable=True, env={"TALARIA_MODEL": "openai:gpt-4o"}) as ed:
        ed.initialize()
        sid = ed.new_session()
        answer = ed.prompt(sid, "delegate it", timeout=30)
        sent = costs(ed, sid)
    assert answer["usage"]["inputTokens"] == 3000 and answer["usage"]["outputTokens"] == 75
    assert answer["usage"]["cachedReadTokens"] == 100
    parent1, child1, parent2 = gpt_4o(1000, 40), gpt_4o(500, 25, 100), gpt_4o(1500, 10)
    assert sent == pytest.approx([parent1, parent1 + child1 + parent2], abs=1e-6)
