"""A crash (kill -9) loses at most the message in flight; a restored session is usable."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import anyio

from talaria.agent.config import load_config
from talaria.agent.door import LocalDoor
from talaria.agent.loop import run_turn
from talaria.agent.providers.factory import create_retrying_provider
from talaria.agent.runtime import Opening, new_session
from talaria.agent.store import Store
from talaria.tools.local.workspace import LocalWorkspace
from tests import ROOT
from tests.helpers import assert_pairs_complete, openai_env


def test_kill_9_mid_tool_keeps_every_committed_message(fake_llm, tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    fake_llm.script([
        {"text": "Running it.", "tool_calls": [
            {"name": "terminal", "arguments": {"command": "touch started; sleep 60"}}]},
    ])
    env = {**os.environ, **openai_env(fake_llm), "TALARIA_HOME": str(home),
           "TALARIA_MODEL": "openai:fake", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "talaria.acp_server.cli.main", "run", "do it", "--yes", "--cwd", str(project)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 20
        while not (project / "started").exists():
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the agent and its command, like a crash would
        proc.wait()
    db = home / "sessions.db"
    assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone() == ("ok",)
    store = Store(db)
    [record] = store.list_sessions()
    messages = store.messages(record.id)
    assert [m["role"] for m in messages] == ["system", "user", "assistant"]
    assert messages[2]["tool_calls"][0]["name"] == "terminal"

    # Brought back, the session answers the dangling call and can go on.
    config = load_config(env={"TALARIA_HOME": str(home)})
    provider = create_retrying_provider("openai:fake", env=openai_env(fake_llm))
    session = new_session(config, Opening(project, session_id=record.id, history=messages),
                          door=LocalDoor(LocalWorkspace(project)), provider=provider, store=store)
    assert_pairs_complete(session.messages)
    assert "Interrupted" in store.messages(record.id)[-1]["content"]
    fake_llm.script([{"text": "It was interrupted; want me to rerun it?"}])
    assert anyio.run(run_turn, session, "what happened?") == "end_turn"
    assert_pairs_complete(store.messages(record.id))
