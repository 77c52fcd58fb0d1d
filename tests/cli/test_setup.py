"""`talaria setup`: config.toml and the 0600 credentials file, scripted and at a real terminal."""

from __future__ import annotations

import os
import pty
import select
import stat
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from talaria.agent.config import load_credentials
from tests.acp.test_client import agent_env
from tests.fakellm import FakeLLM


def setup(home: Path, *args: str, key: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "talaria.acp_server", "setup", *args], input=key + "\n",
                          env=agent_env(home), capture_output=True, text=True, timeout=30,
                          start_new_session=True)


def test_scripted_setup_writes_the_model_and_keeps_the_key_out_of_the_config(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home).mkdir()
    (home / "config.toml").write_text('max_turns = 12\nmodel = "old:x"\n')
    result = setup(home, "--provider", "openai", "--model", "gpt-4.1", "--api-key-env",
                   "OPENAI_API_KEY", key="sk-from-stdin-123")
    assert result.returncode == 0, result.stderr
    assert "sk-from-stdin" not in result.stdout + result.stderr
    config = tomllib.loads((home / "config.toml").read_text())
    assert config == {"model": "openai:gpt-4.1", "max_turns": 12}
    assert "sk-" not in (home / "config.toml").read_text()
    assert stat.S_IMODE((home / "credentials").stat().st_mode) == 0o600
    assert load_credentials(home) == {"OPENAI_API_KEY": "sk-from-stdin-123"}

    # The stored key is used when nothing is exported; an exported one wins.
    shown = subprocess.run([sys.executable, "-m", "talaria.acp_server", "config"], env=agent_env(home),
                           capture_output=True, text=True, timeout=30).stdout
    assert "sk-…23" in shown and "openai:gpt-4.1" in shown
    env = agent_env(home, OPENAI_API_KEY="env-key-456789")
    shown = subprocess.run([sys.executable, "-m", "talaria.acp_server", "config"], env=env,
                           capture_output=True, text=True, timeout=30).stdout
    assert "env…89" in shown


@pytest.mark.parametrize("args, message", [
    (["--provider", "nope", "--model", "m"], "unknown provider"),
    (["--provider", "openai", "--model", "m", "--api-key-env", "MY_KEY"], "reads its key from OPENAI_API_KEY"),
    (["--provider", "custom", "--model", "m"], "base URL is required"),
    (["--model", "m"], "--provider is required"),
    # Issue 28: a key where a model, URL or name goes would be written to 0644 config.toml.
    (["--provider", "openai", "--model", "sk-proj-pastedpastedpasted123"], "--model looks like an API key"),
    (["--provider", "custom", "--model", "m", "--base-url", "https://me:s3cretpass@llm.example/v1"],
     "--base-url looks like an API key"),
])
def test_bad_choices_write_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    result = setup(tmp_path / "home", *args, key="k")
    assert result.returncode == 2 and message in result.stderr
    assert not (tmp_path / "home" / "config.toml").exists()
    assert not (tmp_path / "home" / "credentials").exists()


def test_a_custom_endpoint_set_up_by_script_serves_talaria_run(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    result = setup(home, "--provider", "custom", "--name", "local-llm", "--model", "coder",
                   "--base-url", fake_llm.openai_base_url, "--api-key-env", "LOCAL_LLM_KEY",
                   key="sk-local-secret")
    assert result.returncode == 0, result.stderr
    table = tomllib.loads((home / "config.toml").read_text())["providers"]["local-llm"]
    assert table == {"base_url": fake_llm.openai_base_url, "api_key_env": "LOCAL_LLM_KEY"}
    fake_llm.script([{"text": "Hello from the custom endpoint."}])
    run = subprocess.run([sys.executable, "-m", "talaria.acp_server", "run", "Say hello", "--acp"],
                         env=agent_env(home), cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    assert "Hello from the custom endpoint." in run.stdout
    request = fake_llm.requests[-1]
    assert request["json"]["model"] == "coder"
    assert request["headers"]["authorization"] == "Bearer sk-local-secret"


def test_interactive_setup_hides_the_key(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = agent_env(home)
    pid, fd = pty.fork()
    if pid == 0:  # the child: a real terminal on stdin/stdout, as when a person runs it
        os.execve(sys.executable, [sys.executable, "-m", "talaria.acp_server", "setup"], env)
    transcript = b""
    try:
        for wait_for, answer in ((b"Number", b"2\n"), (b"Model", b"\n"),
                                 (b"ANTHROPIC_API_KEY", b"sk-ant-typed-secret\n"), (b"Try it", None)):
            transcript += read_until(fd, wait_for)
            if answer is not None:
                os.write(fd, answer)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, transcript
    assert b"sk-ant-typed-secret" not in transcript  # getpass: never echoed
    assert tomllib.loads((home / "config.toml").read_text())["model"] == "anthropic:claude-sonnet-4-5"
    assert load_credentials(home) == {"ANTHROPIC_API_KEY": "sk-ant-typed-secret"}


def test_a_key_pasted_at_the_model_question_is_asked_again(tmp_path: Path) -> None:
    """Issue 28: the model prompt took `sk-...` and wrote it to config.toml (mode 0644)."""
    home = tmp_path / "home"
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(sys.executable, [sys.executable, "-m", "talaria.acp_server", "setup"], agent_env(home))
    transcript = b""
    try:
        for wait_for, answer in ((b"Number", b"1\n"), (b"Model", b"sk-proj-pastedpastedpasted123\n"),
                                 (b"looks like an API key", None), (b"Model [gpt-4.1]: ", b"gpt-4.1\n"),
                                 (b"OPENAI_API_KEY", b"sk-proj-pastedpastedpasted123\n"), (b"Try it", None)):
            seen = transcript.rsplit(b"API key", 1)[-1] if wait_for.startswith(b"Model [") else b""
            if wait_for not in seen:  # the question again may come in the warning's chunk
                transcript += read_until(fd, wait_for)
            if answer is not None:
                os.write(fd, answer)
    except BaseException:
        os.kill(pid, 9)  # a child waiting for an answer never comes back by itself
        raise
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, transcript
    config = (home / "config.toml").read_text()
    assert "sk-" not in config and tomllib.loads(config)["model"] == "openai:gpt-4.1"
    assert load_credentials(home) == {"OPENAI_API_KEY": "sk-proj-pastedpastedpasted123"}


def read_until(fd: int, marker: bytes, timeout: float = 15) -> bytes:
    data, deadline = b"", time.monotonic() + timeout
    while marker not in data:
        left = deadline - time.monotonic()
        assert left > 0, f"no {marker!r} in {data!r}"
        if select.select([fd], [], [], left)[0]:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the child closed the terminal
                chunk = b""
            assert chunk, f"no {marker!r} in {data!r}"
            data += chunk
    return data


def test_credentials_file_format(tmp_path: Path) -> None:
    assert load_credentials(tmp_path) == {}
    (tmp_path / "credentials").write_text(
        "# written by talaria setup\n\nOPENAI_API_KEY=sk-1=2\nQUOTED = 'v w'\nnot a line\n1BAD=x\n")
    assert load_credentials(tmp_path) == {"OPENAI_API_KEY": "sk-1=2", "QUOTED": "v w"}
