"""An environment that cannot start says its real cause wherever it is used (issue 28): the
ssh error itself (`Could not resolve hostname`), not "the connection was lost", in `talaria
run`, `run --acp`, a batch task and `env check` alike; `ssh:HOST:PORT` takes the port."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.acp.test_client import agent_env
from tests.cli.test_cli_run import talaria
from tests.fakellm import FakeLLM

HOST = "ssh:nobody@no-such-host.invalid"
CAUSE = "Could not resolve hostname no-such-host.invalid"


@pytest.mark.parametrize("how", ["run", "run-acp", "batch", "env-check"])
def test_an_unreachable_ssh_host_names_the_cause(tmp_path: Path, fake_llm: FakeLLM, how: str) -> None:
    fake_llm.script([{"tool_calls": [{"name": "terminal", "arguments": {"command": "ls"}}]},
                     {"text": "done"}])
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"prompt": "go", "environment": HOST}) + "\n")
    args = {"run": ["run", "go", "--yes", "--env", HOST],
            "run-acp": ["run", "go", "--yes", "--acp", "--env", HOST],
            "batch": ["batch", "tasks.jsonl", "--run-name", "r"],
            "env-check": ["env", "check", HOST]}[how]
    done = talaria(args, agent_env(tmp_path / "home", fake_llm), tmp_path)
    assert CAUSE in done.stdout + done.stderr, (done.stdout, done.stderr)
    assert "was lost" not in done.stdout + done.stderr
    assert done.returncode == {"run": 2, "run-acp": 0, "batch": 1, "env-check": 1}[how], done.stderr


def test_ssh_host_port_is_taken_as_the_port(tmp_path: Path) -> None:
    done = talaria(["env", "check", "ssh:nobody@127.0.0.1:1"], agent_env(tmp_path / "home"), tmp_path)
    assert "port 1: Connection refused" in done.stdout, done.stdout + done.stderr
    assert "127.0.0.1:1: Name or service" not in done.stdout
