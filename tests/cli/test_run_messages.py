"""What `talaria run` tells a person when the model cannot be used: one line, the real cause,
the setting or endpoint involved, the advice once; no blank first line, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.acp.test_client import agent_env
from tests.cli.test_cli_run import talaria
from tests.fakellm import FakeLLM

FAST_429 = {"fault": {"status": 429, "retry_after_ms": 10}}


def error_lines(stderr: str) -> list[str]:
    assert not stderr.startswith("\n"), repr(stderr[:80])
    assert "Traceback" not in stderr
    return [line for line in stderr.splitlines() if line]


@pytest.mark.parametrize("door", [[], ["--acp"]])
def test_no_model_configured_names_the_settings(tmp_path: Path, door: list[str]) -> None:
    result = talaria(["run", "hi", *door], agent_env(tmp_path / "home"), tmp_path)
    assert result.returncode == 3
    [line] = error_lines(result.stderr)
    assert line.startswith("talaria: no model configured: set TALARIA_MODEL")
    assert "authentication failed" not in line and "API key (" not in line
    assert line.count("talaria setup") == 1


@pytest.mark.parametrize("door", [[], ["--acp"]])
def test_a_rate_limited_model_names_the_endpoint_and_advises_once(
    fake_llm: FakeLLM, tmp_path: Path, door: list[str]
) -> None:
    # Some text streams, then the stream breaks: the answer's line is ended on stdout.
    broken = {"fault": "stream_error", "after_chunks": 2, "text": "partial answer",
              "error_type": "rate_limit_error"}
    fake_llm.script([broken, *[FAST_429] * 3])
    result = talaria(["run", "hi", *door], agent_env(tmp_path / "home", fake_llm), tmp_path)
    assert result.returncode == 3
    [line] = error_lines(result.stderr)
    assert line.startswith("talaria: ") and fake_llm.openai_base_url in line
    assert "rate limited after 3 retries" in line
    assert line.count("Wait a minute") == 1
    # The retry notices on stdout say what happened, without the advice.
    assert "Wait a minute" not in result.stdout and result.stdout.count("retrying") == 3


def test_a_missing_key_names_the_variable_once(tmp_path: Path) -> None:
    env = agent_env(tmp_path / "home", TALARIA_MODEL="anthropic:claude-x")
    result = talaria(["run", "hi"], env, tmp_path)
    assert result.returncode == 3
    [line] = error_lines(result.stderr)
    assert "ANTHROPIC_API_KEY is not set" in line and line.count("ANTHROPIC_API_KEY") == 1
