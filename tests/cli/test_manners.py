"""What a person at a terminal meets: `talaria acp` by hand, Ctrl-C, `--version`, `config`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from talaria.acp_server.cli.main import ACP_HINT
from talaria.acp_server.version import VERSION
from talaria.agent.config import describe, load_config
from tests.acp.test_client import agent_env
from tests.acp_harness import Editor
from tests.cli.test_cli_run import TIMEOUT, exit_code, spawn_on_a_terminal, talaria
from tests.cli.test_setup import read_until
from tests.fakellm import FakeLLM


def test_acp_started_at_a_terminal_says_what_it_waits_for_and_ctrl_c_exits_130(tmp_path: Path) -> None:
    pid, fd = spawn_on_a_terminal(["acp"], agent_env(tmp_path / "home"), tmp_path)
    try:
        screen = read_until(fd, b"--help`.")
        # Ready to serve: answering a request from the terminal proves the hint came first.
        os.write(fd, b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{}}\n')
        screen += read_until(fd, b'"sessions"')
        os.write(fd, b"\x03")
        screen += read_until(fd, b"interrupted")
        status = exit_code(pid)
    finally:
        os.close(fd)
    assert status == 130, screen
    text = screen.decode()
    assert text.count(ACP_HINT) == 1 and text.index(ACP_HINT) < text.index('"sessions"')
    assert "Traceback" not in text and "KeyboardInterrupt" not in text


def test_acp_launched_by_an_editor_prints_no_hint(tmp_path: Path, fake_llm: FakeLLM) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
    assert b"Agent Client Protocol on stdin" not in ed.stderr


STALL = {"text": "Working on it", "fault": "stall", "after_chunks": 3}


@pytest.mark.parametrize(("args", "ready"), [
    (["run", "go"], b"Working"),
    (["run", "go", "--acp"], b"Working"),
    (["demo", "--live"], b"Working"),
    (["batch", "tasks.jsonl", "--run-name", "r", "--workers", "1"], b"done"),
], ids=["run", "run-acp", "demo", "batch"])
def test_ctrl_c_is_a_clean_exit(fake_llm: FakeLLM, tmp_path: Path, args: list[str], ready: bytes) -> None:
    fake_llm.script([STALL] * 3)
    (tmp_path / "tasks.jsonl").write_text('{"prompt": "go"}\n')
    pid, fd = spawn_on_a_terminal(args, agent_env(tmp_path / "home", fake_llm), tmp_path)
    try:
        screen = read_until(fd, ready)
        os.write(fd, b"\x03")
        screen += read_until(fd, b"interrupted")
        status = exit_code(pid)
    finally:
        os.close(fd)
    assert status == 130, screen
    assert b"Traceback" not in screen and b"KeyboardInterrupt" not in screen


def test_version_comes_from_one_place(tmp_path: Path, fake_llm: FakeLLM) -> None:
    """`--version` and `initialize` say VERSION; the built wheel's metadata says it too
    (tests/cli/test_wheel.py: an editable install's metadata can be stale)."""
    installed = VERSION
    result = talaria(["--version"], agent_env(tmp_path / "home"), tmp_path)
    assert (result.returncode, result.stdout) == (0, f"talaria {installed}\n")
    with Editor(tmp_path, fake_llm) as ed:
        assert ed.initialize()["agentInfo"]["version"] == installed


def test_help_documents_the_exit_statuses(tmp_path: Path) -> None:
    for args in (["--help"], ["run", "--help"]):
        out = talaria(args, agent_env(tmp_path / "home"), tmp_path).stdout
        for line in ("exit status:", "  0    done", "  4    a tool call needed permission",
                     "  130  interrupted"):
            assert line in out, (args, out)


def test_config_names_the_credentials_file_as_the_source_of_a_stored_key(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "credentials").write_text(
        "OPENAI_API_KEY=sk-stored-123456\nANTHROPIC_API_KEY=sk-ant-stored-99\n"
        "WORK_KEY=work-stored-777777\nTALARIA_MODEL=openai:stored\n")
    (home / "config.toml").write_text('[providers.work]\nbase_url = "http://x/v1"\napi_key_env = "WORK_KEY"\n')
    env = {"TALARIA_HOME": str(home), "ANTHROPIC_API_KEY": "sk-ant-exported-42"}
    rows = {name: (value, source) for name, value, source in describe(load_config(env=env), env)}
    stored = str(home / "credentials")
    assert rows["OPENAI_API_KEY"] == ("sk-…56", stored)
    assert rows["ANTHROPIC_API_KEY"] == ("sk-…42", "env ANTHROPIC_API_KEY")  # exported wins
    assert rows["providers.work.api_key"] == ("wor…77", stored)
    assert rows["model"] == ("openai:stored", stored)
    assert rows["home"] == (str(home), "env TALARIA_HOME")

    shown = subprocess.run([sys.executable, "-m", "talaria.acp_server", "config"],
                           env=agent_env(home), capture_output=True, text=True, timeout=TIMEOUT).stdout
    (line,) = [ln.split() for ln in shown.splitlines() if ln.startswith("OPENAI_API_KEY")]
    assert line == ["OPENAI_API_KEY", "sk-…56", f"({stored})"]
