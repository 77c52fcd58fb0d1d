"""`talaria run`, in process and with `--acp` (a `talaria acp` child), as real subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakellm import FakeLLM
from tests.test_client import agent_env, call

TIMEOUT = 30


def talaria(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # A new session: no controlling terminal, so nothing can prompt on it.
    return subprocess.run([sys.executable, "-m", "acp_server", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL,
                          start_new_session=True)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("hello world\n")
    return root


def edit_task(llm: FakeLLM) -> None:
    llm.script([
        {"text": "Reading first.", **call("read_file", path="notes.txt")},
        call("patch", path="notes.txt", old_string="hello", new_string="goodbye"),
        call("terminal", command="cat notes.txt"),
        {"text": "Changed it."},
    ])


@pytest.mark.parametrize("via", [[], ["--acp"]], ids=["in-process", "acp"])
def test_run_yes_prints_text_tool_lines_and_a_summary(
    fake_llm: FakeLLM, project: Path, tmp_path: Path, via: list[str]
) -> None:
    edit_task(fake_llm)
    result = talaria(["run", "Say goodbye", "--yes", *via], agent_env(tmp_path / "home", fake_llm), project)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:5] == ["Reading first.", "✓ Read notes.txt", "✓ Edit notes.txt", "✓ Run `cat notes.txt`",
                         "Changed it."]
    assert lines[-1].startswith("— end_turn: 3 tool calls (0 failed), session ")
    assert (project / "notes.txt").read_text() == "goodbye world\n"
    assert "Traceback" not in result.stderr and "INFO" not in result.stderr


def test_run_acp_json_prints_session_updates(fake_llm: FakeLLM, project: Path, tmp_path: Path) -> None:
    edit_task(fake_llm)
    env = agent_env(tmp_path / "home", fake_llm)
    result = talaria(["run", "Say goodbye", "--acp", "--yes", "--json"], env, project)
    assert result.returncode == 0, result.stderr
    lines: list[dict[str, Any]] = [json.loads(line) for line in result.stdout.splitlines()]
    *updates, summary = lines
    assert summary == {"type": "summary", "stop_reason": "end_turn", "session": updates[0]["sessionId"],
                       "tool_calls": 3, "failed_tool_calls": 0}
    assert {u["sessionId"] for u in updates} == {summary["session"]}
    kinds = {u["update"]["sessionUpdate"] for u in updates}
    assert {"agent_message_chunk", "tool_call", "tool_call_update", "usage_update"} <= kinds
    assert any(c.get("type") == "diff" for u in updates for c in u["update"].get("content") or ())


def test_run_acp_without_yes_or_a_terminal_rejects_edits(
    fake_llm: FakeLLM, project: Path, tmp_path: Path
) -> None:
    fake_llm.script([call("patch", path="notes.txt", old_string="hello", new_string="HACKED"),
                     {"text": "Fine, I won't."}])
    result = talaria(["run", "Edit it", "--acp"], agent_env(tmp_path / "home", fake_llm), project)
    assert result.returncode == 0, result.stderr
    assert "✗ Edit notes.txt — The user rejected this tool call." in result.stdout
    assert (project / "notes.txt").read_text() == "hello world\n"


def test_run_acp_passes_flags_and_reports_errors(fake_llm: FakeLLM, project: Path, tmp_path: Path) -> None:
    env = agent_env(tmp_path / "home")  # no model anywhere
    result = talaria(["run", "hi", "--acp", "--yes"], env, project)
    assert result.returncode == 3
    assert "no model configured" in result.stderr and "Traceback" not in result.stderr

    fake_llm.script([{"text": "In plan mode."}])
    env = agent_env(tmp_path / "home", fake_llm, TALARIA_MODEL="openai:unused")
    result = talaria(["run", "hi", "--acp", "--model", "openai:from-flag", "--mode", "plan"], env, project)
    assert result.returncode == 0, result.stderr
    assert fake_llm.requests[-1]["json"]["model"] == "from-flag"

    result = talaria(["run", "hi", "--acp", "--mode", "sideways"], env, project)
    assert result.returncode == 2 and "unknown mode" in result.stderr
