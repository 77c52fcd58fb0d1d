"""Reasoning effort reaches the model: OpenAI's `reasoning_effort`, Anthropic's thinking budget."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from talaria.agent.loop import run_turn
from tests.acp_harness import Editor
from tests.helpers import make_session


@pytest.mark.parametrize(("model", "check"), [
    ("openai:o4-mini", lambda body: body["reasoning_effort"] == "high"),
    ("anthropic:claude-test", lambda body: body["thinking"] == {"type": "enabled", "budget_tokens": 24_576}
        and body["max_tokens"] > 24_576),
])
def test_session_effort_goes_into_the_request(fake_llm, tmp_path: Path, model: str, check) -> None:
    session = make_session(fake_llm, tmp_path, model=model, reasoning_effort="high")
    fake_llm.script([{"text": "ok"}])
    assert anyio.run(run_turn, session, "think hard") == "end_turn"
    assert check(fake_llm.requests[-1]["json"])


def test_no_effort_sends_nothing(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    fake_llm.script([{"text": "ok"}])
    anyio.run(run_turn, session, "q")
    assert "reasoning_effort" not in fake_llm.requests[-1]["json"]


def test_bad_effort_in_config_is_refused(fake_llm, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="reasoning_effort"):
        make_session(fake_llm, tmp_path, reasoning_effort="extreme")


def test_acp_config_option_sets_the_effort(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        result = ed.request("session/set_config_option",
                            {"sessionId": sid, "configId": "reasoning_effort", "value": "low"})
        effort = next(o for o in result["configOptions"] if o["id"] == "reasoning_effort")
        assert effort["currentValue"] == "low"
        fake_llm.script([{"text": "ok"}])
        ed.prompt(sid, "q")
        assert fake_llm.requests[-1]["json"]["reasoning_effort"] == "low"


def test_acp_exec_mode_is_a_per_session_option(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        first, second = ed.new_session(), ed.new_session()
        result = ed.request("session/set_config_option",
                            {"sessionId": first, "configId": "exec_mode", "value": "strict"})
        assert next(o for o in result["configOptions"] if o["id"] == "exec_mode")["currentValue"] == "strict"
        other = ed.request("session/set_config_option",
                           {"sessionId": second, "configId": "reasoning_effort", "value": "default"})
        assert next(o for o in other["configOptions"] if o["id"] == "exec_mode")["currentValue"] == "project"
        fake_llm.script([
            {"tool_calls": [{"name": "execute_code", "arguments": {"code": "import os; print(os.getcwd())"}}]},
            {"text": "ok"},
        ])
        ed.prompt(first, "where am I?")
        out = next(m for m in fake_llm.requests[-1]["json"]["messages"] if m["role"] == "tool")["content"]
        assert str(ed.project) not in out and "cache/exec" in out
