"""stdout closed early (`talaria config | head`): every command stops quietly with 141, as
other commands a closed pipe ends, with no traceback and no "[Errno 32] Broken pipe" (issue 28)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from talaria.acp_server.cli.exits import BROKEN_PIPE
from tests.acp.test_client import agent_env

ROWS = 2000
"""Enough output to fill a pipe's buffer (64 KiB), so the write meets the closed pipe."""


def closed_stdout(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """Run with stdout a pipe whose reader has gone (as `| head` does after its lines)."""
    child = subprocess.Popen([sys.executable, "-m", "talaria.acp_server", *args], env=env, cwd=cwd,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()
    stderr = child.stderr.read()
    return subprocess.CompletedProcess(args, child.wait(timeout=120), b"", stderr)


@pytest.mark.parametrize("args", [["config"], ["skills", "list", "--json"], ["--help"], ["batch", "--help"],
                                  ["trajectories", "export", "big.jsonl"], ["checkpoints", "list"]],
                         ids=["config", "skills", "help", "batch-help", "export", "checkpoints"])
def test_a_closed_stdout_stops_the_command_quietly(tmp_path: Path, args: list[str]) -> None:
    turns = [{"from": "human", "value": "x" * 100}, {"from": "gpt", "value": "y" * 100}]
    (tmp_path / "big.jsonl").write_text("".join(json.dumps({"conversations": turns}) + "\n"
                                                for _ in range(ROWS)))
    done = closed_stdout(args, agent_env(tmp_path / "home"), tmp_path)
    assert done.returncode == BROKEN_PIPE, done.stderr
    assert b"Traceback" not in done.stderr and b"Broken pipe" not in done.stderr, done.stderr
    assert b"Exception ignored" not in done.stderr


@pytest.mark.parametrize("via", [[], ["--acp"]], ids=["in-process", "acp"])
def test_talaria_run_into_a_closed_pipe_stops_quietly(tmp_path: Path, fake_llm, via: list[str]) -> None:  # type: ignore[no-untyped-def]
    fake_llm.script([{"text": "word " * 20_000}])  # more than a pipe holds
    done = closed_stdout(["run", "talk", *via], agent_env(tmp_path / "home", fake_llm), tmp_path)
    assert done.returncode == BROKEN_PIPE, done.stderr
    assert b"Traceback" not in done.stderr and b"Broken pipe" not in done.stderr, done.stderr
