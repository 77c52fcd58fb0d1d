"""`talaria run` and its log (issue 28): an empty prompt is refused before anything starts;
plain `talaria run` keeps `$TALARIA_HOME/logs/talaria.log` as `talaria acp` does."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.acp.test_client import agent_env
from tests.cli.test_cli_run import talaria
from tests.fakellm import FakeLLM


@pytest.mark.parametrize("prompt", ["", "   ", "\n\t"], ids=["empty", "spaces", "whitespace"])
@pytest.mark.parametrize("via", [[], ["--acp"]], ids=["in-process", "acp"])
def test_an_empty_prompt_is_refused(tmp_path: Path, fake_llm: FakeLLM, prompt: str, via: list[str]) -> None:
    done = talaria(["run", prompt, *via], agent_env(tmp_path / "home", fake_llm), tmp_path)
    assert done.returncode == 2, done.stderr
    assert "the prompt is empty: say what to do" in done.stderr
    assert not fake_llm.requests  # nothing was sent


@pytest.mark.parametrize("via", [[], ["--acp"]], ids=["in-process", "acp"])
def test_talaria_run_writes_the_log_file(tmp_path: Path, fake_llm: FakeLLM, via: list[str]) -> None:
    fake_llm.script([{"text": "Hello."}])
    home = tmp_path / "home"
    done = talaria(["run", "say hello", *via], agent_env(home, fake_llm), tmp_path)
    assert done.returncode == 0, done.stderr
    log = (home / "logs" / "talaria.log").read_text()
    assert " INFO " in log and "HTTP Request: POST" in log, log
    assert "INFO" not in done.stderr  # the detail stays in the file
