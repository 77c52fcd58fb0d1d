"""`talaria run`, in process and with `--acp` (a `talaria acp` child), as real subprocesses."""

from __future__ import annotations

import json
import os
import pty
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests import ROOT
from tests.acp.test_client import agent_env, call
from tests.cli.test_setup import read_until
from tests.fakellm import FakeLLM

TIMEOUT = 30


def talaria(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # A new session: no controlling terminal, so nothing can prompt on it.
    return subprocess.run([sys.executable, "-m", "talaria.acp_server", *args], env=env, cwd=cwd,
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
                       "tool_calls": 3, "failed_tool_calls": 0, "unasked_tool_calls": 0}
    assert {u["sessionId"] for u in updates} == {summary["session"]}
    kinds = {u["update"]["sessionUpdate"] for u in updates}
    assert {"agent_message_chunk", "tool_call", "tool_call_update", "usage_update"} <= kinds
    contents = [c for u in updates if u["update"]["sessionUpdate"] == "tool_call_update"
                for c in u["update"].get("content") or ()]
    assert any(c["type"] == "diff" for c in contents) and any(c["type"] == "terminal" for c in contents)


@pytest.mark.parametrize("via", [[], ["--acp"]], ids=["in-process", "acp"])
def test_without_yes_or_a_terminal_edits_are_refused_and_the_run_says_why(
    fake_llm: FakeLLM, project: Path, tmp_path: Path, via: list[str]
) -> None:
    fake_llm.script([call("patch", path="notes.txt", old_string="hello", new_string="HACKED"),
                     call("terminal", command="touch made.txt"), {"text": "Fine, I won't."}])
    result = talaria(["run", "Edit it", *via], agent_env(tmp_path / "home", fake_llm), project)
    assert result.returncode == 4, result.stderr
    assert "✗ Edit notes.txt — not allowed: there was no terminal to ask on" in result.stdout
    assert "✗ Run `touch made.txt` — not allowed: there was no terminal to ask on" in result.stdout
    assert "The user rejected" not in result.stdout  # nobody was there to reject anything
    (line,) = [ln for ln in result.stderr.splitlines() if ln.startswith("talaria:")]
    assert line.startswith("talaria: 2 tool calls (Edit notes.txt, Run `touch made.txt`) needed "
                           "permission and there was no terminal to ask on, so they were refused.")
    # Only what would allow both: accept_edits runs no command (issue 28).
    assert line.endswith("Allow them with --yes (every tool call) or --mode auto (edits in the "
                         "project, commands sandboxed).")
    assert (project / "notes.txt").read_text() == "hello world\n" and not (project / "made.txt").exists()


@pytest.mark.parametrize("via", [[], ["--acp"]], ids=["in-process", "acp"])
@pytest.mark.parametrize(("calls", "mode", "advice"), [
    ([call("patch", path="notes.txt", old_string="hello", new_string="HI")], None,
     "--yes (every tool call), --mode accept_edits (edits in the project) or --mode auto"),
    ([call("terminal", command="touch made.txt")], "accept_edits",
     "--yes (every tool call) or --mode auto (edits in the project, commands sandboxed)."),
    ([call("terminal", command="touch made.txt")], "auto", None),  # sandboxed: runs unasked
    ([call("patch", path="notes.txt", old_string="hello", new_string="HI")], "accept_edits", None),
    ([call("read_file", path="../outside.txt")], "auto", "Allow it with --yes (every tool call)."),
    ([call("terminal", command="touch made.txt")], "default",
     "--yes (every tool call) or --mode auto (edits in the project, commands sandboxed)."),
], ids=["edit", "command-in-accept-edits", "command-in-auto", "edit-in-accept-edits",
        "outside-in-auto", "command"])
def test_the_advice_names_only_what_would_allow_the_refused_calls(
    fake_llm: FakeLLM, project: Path, tmp_path: Path, via: list[str], calls: list, mode: str | None,
    advice: str | None,
) -> None:
    (tmp_path / "outside.txt").write_text("elsewhere\n")
    fake_llm.script([*calls, {"text": "Done."}])
    flags = ["--mode", mode] if mode else []
    result = talaria(["run", "go", *flags, *via], agent_env(tmp_path / "home", fake_llm), project)
    if advice is None:
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode == 4, result.stderr
    (line,) = [ln for ln in result.stderr.splitlines() if ln.startswith("talaria:")]
    assert advice in line, line
    if mode:
        assert f"--mode {mode}" not in line  # the mode it had did not allow it


@pytest.mark.parametrize("via", [[], ["--acp"]], ids=["in-process", "acp"])
def test_the_advice_works_mode_accept_edits_needs_no_terminal_for_edits(
    fake_llm: FakeLLM, project: Path, tmp_path: Path, via: list[str]
) -> None:
    fake_llm.script([call("patch", path="notes.txt", old_string="hello", new_string="goodbye"),
                     {"text": "Done."}])
    env = agent_env(tmp_path / "home", fake_llm)
    result = talaria(["run", "Edit it", "--mode", "accept_edits", "--json", *via], env, project)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.splitlines()[-1])
    assert (summary["stop_reason"], summary["unasked_tool_calls"]) == ("end_turn", 0)
    assert (project / "notes.txt").read_text() == "goodbye world\n"


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
    assert result.returncode == 2 and "unknown permission mode" in result.stderr


def spawn_on_a_terminal(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, int]:
    """`talaria ARGS` with a real terminal (a pty) as its controlling terminal: (pid, fd)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: permission questions go to /dev/tty, Ctrl-C comes from it
        # As a terminal's shell starts it: a suite run from a background job (`cmd &`)
        # inherits SIGINT ignored, and Python then keeps ignoring Ctrl-C.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.chdir(cwd)
        os.execve(sys.executable, [sys.executable, "-m", "talaria.acp_server", *args], env)
    return pid, fd


def exit_code(pid: int, timeout: float = TIMEOUT) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError(f"talaria did not exit within {timeout} s")


@pytest.mark.parametrize("via", [[], ["--acp"]], ids=["in-process", "acp"])
def test_run_asks_on_the_terminal_showing_the_diff_and_stops_cleanly_on_ctrl_c(
    fake_llm: FakeLLM, project: Path, tmp_path: Path, via: list[str]
) -> None:
    (project / "notes.txt").write_text("hello world\nsecond line\n")
    fake_llm.script([call("patch", path="notes.txt", old_string="hello", new_string="goodbye"),
                     call("write_file", path="new.txt", content="fresh\n"),
                     call("terminal", command="sleep 30"), {"text": "unreachable"}])
    pid, fd = spawn_on_a_terminal(["run", "Edit, then wait", *via],
                                  agent_env(tmp_path / "home", fake_llm, NO_COLOR="1"), project)
    try:
        screen = read_until(fd, b"> ")
        question = screen.decode()
        assert "Allow Edit notes.txt?" in question and "[y] Allow once" in question
        # The diff comes before the question, and nothing is written yet.
        diff = question.index("-hello world"), question.index("+goodbye world"), question.index("[y]")
        assert diff == tuple(sorted(diff)) and f"--- {project / 'notes.txt'}" in question
        assert " second line" in question and "\x1b[" not in question  # context; NO_COLOR
        assert (project / "notes.txt").read_text() == "hello world\nsecond line\n"
        os.write(fd, b"y\n")
        screen += (more := read_until(fd, b"> "))
        assert f"new file {project / 'new.txt'}" in more.decode() and "+fresh" in more.decode()
        os.write(fd, b"n\n")
        screen += read_until(fd, b"> ")
        os.write(fd, b"y\n")
        screen += read_until(fd, b"\n")
        time.sleep(0.5)  # `sleep 30` is running in a terminal of ours
        os.write(fd, b"\x03")
        screen += read_until(fd, b"interrupted")
        status = exit_code(pid)
    finally:
        os.close(fd)
    assert status == 130, screen
    assert b"Traceback" not in screen and b"expired request" not in screen
    assert (project / "notes.txt").read_text() == "goodbye world\nsecond line\n"
    assert not (project / "new.txt").exists()


@pytest.mark.parametrize("via", [[], ["--acp"]], ids=["in-process", "acp"])
def test_ctrl_c_at_a_permission_question_exits_at_once(
    fake_llm: FakeLLM, project: Path, tmp_path: Path, via: list[str]
) -> None:
    """Nothing is left waiting for a key: the question is read without a blocking thread."""
    fake_llm.script([call("patch", path="notes.txt", old_string="hello", new_string="goodbye")])
    pid, fd = spawn_on_a_terminal(["run", "Edit", *via], agent_env(tmp_path / "home", fake_llm), project)
    try:
        screen = read_until(fd, b"> ")
        os.write(fd, b"\x03")
        screen += read_until(fd, b"interrupted")
        status = exit_code(pid)
    finally:
        os.close(fd)
    assert status == 130, screen
    assert b"Traceback" not in screen
    assert (project / "notes.txt").read_text() == "hello world\n"


# -- the README's "Scripting Talaria over ACP" examples, run for real ----------------------------

DEMO = ROOT / "agent" / "data" / "demo"


def readme_block(language: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Scripting Talaria over ACP", 1)[1].split("\n## ", 1)[0]
    return section.split(f"```{language}\n", 1)[1].split("```", 1)[0]


def demo_project(tmp_path: Path) -> Path:
    project = tmp_path / "textstats"
    shutil.copytree(DEMO / "project", project)
    return project


def unittest_passes(project: Path) -> bool:
    return subprocess.run([sys.executable, "-m", "unittest", "-q"], cwd=project,
                          capture_output=True).returncode == 0


def test_readme_python_example(tmp_path: Path) -> None:
    project = demo_project(tmp_path)
    (tmp_path / "example.py").write_text(readme_block("python"))
    env = agent_env(tmp_path / "home", TALARIA_MODEL=f"replay:{DEMO / 'scenario.json'}")
    result = subprocess.run([sys.executable, str(tmp_path / "example.py"), str(project)], env=env,
                            capture_output=True, text=True, timeout=TIMEOUT, start_new_session=True)
    assert result.returncode == 0, result.stderr
    assert "[Edit textstats.py]" in result.stdout
    assert result.stdout.rstrip().endswith(f"end_turn; edited: ['{project / 'textstats.py'}']")
    assert unittest_passes(project)


def test_readme_shell_example_with_raw_json_lines(tmp_path: Path) -> None:
    project = demo_project(tmp_path)
    (tmp_path / "drive.sh").write_text(readme_block("bash"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "talaria").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m talaria.acp_server "$@"\n')
    (bin_dir / "talaria").chmod(0o755)
    env = agent_env(tmp_path / "home", TALARIA_MODEL=f"replay:{DEMO / 'scenario.json'}",
                    PYTHONPATH=str(ROOT))
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    result = subprocess.run(["bash", str(tmp_path / "drive.sh"), str(project)], env=env,
                            capture_output=True, text=True, timeout=TIMEOUT, start_new_session=True)
    assert result.returncode == 0, result.stderr
    *updates, response = result.stdout.splitlines()
    answer = json.loads(response)
    assert (answer["id"], answer["result"]["stopReason"]) == (3, "end_turn")
    assert all(json.loads(line)["method"] == "session/update" for line in updates)
    assert unittest_passes(project)


@pytest.mark.parametrize("via", [[], ["--acp"]], ids=["in-process", "acp"])
def test_add_dir_makes_another_directory_part_of_the_project(
    fake_llm: FakeLLM, project: Path, tmp_path: Path, via: list[str]
) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    env = agent_env(tmp_path / "home", fake_llm)
    for add in (["--add-dir", "../lib"], []):  # relative to where `talaria run` starts
        fake_llm.script([call("write_file", path=str(lib / "made.txt"), content="x\n"),
                         {"text": "Wrote it."}])
        result = talaria(["run", "write it", "--mode", "accept_edits", *add, *via], env, project)
        if add:
            assert result.returncode == 0, result.stderr
            assert (lib / "made.txt").read_text() == "x\n"
            (lib / "made.txt").unlink()
        else:  # outside the project: asks, and there is no terminal to ask on
            assert result.returncode == 4, result.stderr
            assert not (lib / "made.txt").exists()
    result = talaria(["run", "write it", "--add-dir", str(tmp_path / "gone"), *via], env, project)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"talaria: --add-dir: additional directory '{tmp_path / 'gone'}' does not exist\n"
