"""`clarify` in headless runs: `talaria run --yes` allows tool calls but answers no question
for the user, in process (no one to ask) and over ACP (the client skips the question)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from talaria.acp_server.questions import SKIPPED
from talaria.tools.clarify import NO_ANSWER
from tests.acp.test_client import agent_env
from tests.cli.test_cli_run import talaria
from tests.fakellm import FakeLLM


@pytest.mark.parametrize(("via", "told"), [([], NO_ANSWER), (["--acp"], SKIPPED)],
                         ids=["in-process", "acp"])
def test_a_question_in_a_yes_run_gets_no_answer(fake_llm: FakeLLM, tmp_path: Path,
                                                via: list[str], told: str) -> None:
    fake_llm.script([{"tool_calls": [{"name": "clarify", "arguments": {
        "question": "Which cache?", "choices": ["SQLite", "Redis"]}}]}, {"text": "Went with SQLite."}])
    done = talaria(["run", "add a cache", "--yes", *via], agent_env(tmp_path / "home", fake_llm),
                   tmp_path)
    assert done.returncode == 0, done.stderr
    (tool,) = [m for m in fake_llm.requests[1]["json"]["messages"] if m["role"] == "tool"]
    assert json.loads(tool["content"]) == {"answer": None, "note": told}
