"""Exact counts from the child process equal in-process ones; the child goes with the agent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from talaria.agent.context import tokens
from talaria.agent.context.token_child import TokenChild
from tests import ROOT
from tests.agent.context.test_token_bound import DENSE

WAIT_S = 30


@pytest.fixture(scope="module")
def child():
    counter = TokenChild()
    yield counter
    counter.close()


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=2000) | st.sampled_from(DENSE[:-1]))
def test_child_counts_equal_in_process_counts(child: TokenChild, text: str) -> None:
    assert child.count(text) == tokens._count(text)


def test_lone_surrogates_and_empty_texts(child: TokenChild) -> None:
    for text in ["", "a\ud800b", "\udfff" * 10]:
        assert child.count(text) == tokens._count(text)


def test_no_child_means_counting_here(monkeypatch) -> None:
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    broken = TokenChild()
    assert broken.count("hello world") is None
    monkeypatch.setattr(tokens, "_counter", broken.count)
    assert tokens._count("hello world") == 2  # in-process, logged once


def _gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return status.rsplit(")", 1)[1].split()[0] == "Z"


def test_the_child_ends_with_a_killed_agent(tmp_path: Path) -> None:
    code = ("import sys, time\nfrom talaria.agent.context import tokens\n"
            "from talaria.agent.context.token_child import TokenChild\n"
            "child = TokenChild()\ntokens.count_with(child.count)\n"
            "assert tokens.count('hello world') == 2\n"
            "print(child._proc.pid, flush=True)\ntime.sleep(60)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TALARIA_HOME": str(tmp_path)}
    agent = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    assert agent.stdout is not None
    pid = int(agent.stdout.readline())
    assert not _gone(pid)
    agent.send_signal(signal.SIGKILL)
    agent.wait()
    deadline = time.monotonic() + WAIT_S
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid)
