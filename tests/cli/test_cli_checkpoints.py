"""`talaria checkpoints list|restore` after headless runs, and `--no-checkpoints`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.acp.test_client import agent_env, call
from tests.cli.test_cli_run import talaria
from tests.fakellm import FakeLLM


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("hello world\n")
    return root


def change_task(llm: FakeLLM, word: str) -> None:
    llm.script([call("write_file", path="notes.txt", content=f"{word} world\n"), {"text": "Changed."}])


@pytest.mark.parametrize("via", [[], ["--acp"]], ids=["in-process", "acp"])
def test_runs_leave_checkpoints_the_cli_lists_and_restores(fake_llm: FakeLLM, project: Path,
                                                           tmp_path: Path, via: list[str]) -> None:
    env = agent_env(tmp_path / "home", fake_llm)
    for word in ("goodbye", "farewell"):
        change_task(fake_llm, word)
        assert talaria(["run", f"say {word}", "--yes", *via], env, project).returncode == 0
    listing = talaria(["checkpoints", "list"], env, project)
    assert listing.returncode == 0, listing.stderr
    assert "2. " in listing.stdout and "say farewell" in listing.stdout and "1 file(s): notes.txt" in listing.stdout
    rows = [json.loads(line) for line in talaria(["checkpoints", "list", "--json"], env,
                                                 project).stdout.splitlines()]
    assert [r["number"] for r in rows] == [2, 1] and rows[0]["changed"] == [["M", "notes.txt"]]
    restored = talaria(["checkpoints", "restore", "1"], env, project)
    assert restored.returncode == 0, restored.stderr
    assert (project / "notes.txt").read_text() == "hello world\n"
    assert "talaria checkpoints restore 3 takes it back" in restored.stdout
    talaria(["checkpoints", "restore", "3"], env, project)  # the restore, undone
    assert (project / "notes.txt").read_text() == "farewell world\n"
    (project / "sub").mkdir()
    inside = talaria(["checkpoints", "list", "--json"], env, project / "sub")  # the project's
    assert [json.loads(line)["number"] for line in inside.stdout.splitlines()] == [4, 3, 2, 1]
    missing = talaria(["checkpoints", "restore", "9"], env, project)
    assert missing.returncode == 2 and "no checkpoint 9" in missing.stderr
    assert (project / "notes.txt").read_text() == "farewell world\n"
    # Issue 28: the terminal's commands, never the editor's slash commands.
    listing = talaria(["checkpoints", "list"], env, project).stdout
    assert "restore: talaria checkpoints restore 3" in listing and "talaria checkpoints list lists" in missing.stderr
    for said in (listing, restored.stdout, missing.stderr):
        assert "/restore" not in said and "/checkpoints" not in said, said
    assert "Missing numbers" not in listing  # 1 to 4: no gap


def test_gaps_in_checkpoint_numbers_are_explained(fake_llm: FakeLLM, project: Path, tmp_path: Path) -> None:
    env = agent_env(tmp_path / "home", fake_llm)
    # A command may change files, so checkpoint 1 is taken; it changed none, so it is dropped.
    fake_llm.script([call("terminal", command="true"), {"text": "Looked."}])
    assert talaria(["run", "look", "--yes"], env, project).returncode == 0
    change_task(fake_llm, "goodbye")
    assert talaria(["run", "say goodbye", "--yes"], env, project).returncode == 0
    listing = talaria(["checkpoints", "list"], env, project).stdout
    assert listing.startswith("2. ") and "1. " not in listing
    assert "Missing numbers: a turn that changed no file keeps no checkpoint" in listing


@pytest.mark.parametrize("via", [[], ["--acp"]], ids=["in-process", "acp"])
def test_no_checkpoints_takes_none(fake_llm: FakeLLM, project: Path, tmp_path: Path,
                                   via: list[str]) -> None:
    env = agent_env(tmp_path / "home", fake_llm)
    change_task(fake_llm, "goodbye")
    assert talaria(["run", "go", "--yes", "--no-checkpoints", *via], env, project).returncode == 0
    assert (project / "notes.txt").read_text() == "goodbye world\n"
    listing = talaria(["checkpoints", "list"], env, project)
    assert listing.stdout.startswith("No checkpoints yet")
