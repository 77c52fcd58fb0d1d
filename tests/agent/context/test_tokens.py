"""Token counting works offline from the bundled encoding."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from talaria.agent.context import tokens
from tests import ROOT


def test_counts_match_cl100k() -> None:
    assert tokens.count("hello world") == 2
    assert tokens.count("") == 0
    assert tokens.count_messages([{"role": "user", "content": "hello world"}]) == 2 + tokens.MESSAGE_OVERHEAD


def test_no_network_and_no_cache_needed(tmp_path: Path) -> None:
    code = (
        "import socket\n"
        "def refuse(*a, **k): raise OSError('network disabled in this test')\n"
        "socket.socket.connect = refuse\nsocket.create_connection = refuse\n"
        "from talaria.agent.context import tokens\n"
        "assert tokens.encoding() is not None\n"
        "print(tokens.count('The quick brown fox'))\n"
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path / "empty"), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "4"


def test_estimate_when_tiktoken_is_missing(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['tiktoken'] = None\n"
        "from talaria.agent.context import tokens\n"
        "print(tokens.encoding(), tokens.count('abcdefgh'))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["None", "2"]


def test_huge_texts_are_estimated() -> None:
    text = "word " * 1_000_000  # 5 MB: tiktoken would say 1,000,000; the estimate is bytes/4
    assert tokens.count(text) == len(text) // tokens.BYTES_PER_TOKEN


def test_cached_counts_equal_fresh_counts() -> None:
    tokens.clear_cache()
    texts = ["x" * 15, "short but long enough to cache", "def f():\n    return 1\n" * 40,
             "ünïcödé text that is cached as well " * 3]
    fresh = [tokens._count(t) for t in texts]
    assert [tokens.count(t) for t in texts] == fresh
    assert [tokens.count("".join(list(t))) for t in texts] == fresh  # equal text, new object
    edited = texts[2].replace("return 1", "return 12345")
    assert tokens.count(edited) == tokens._count(edited) != fresh[2]
    assert len(tokens._counts) == 4, "texts under CACHE_MIN_CHARS are not cached"


def test_cache_is_bounded(monkeypatch) -> None:
    tokens.clear_cache()
    monkeypatch.setattr(tokens, "CACHE_ENTRIES", 10)
    for i in range(25):
        assert tokens.count(f"message number {i:04d} of a long session") == tokens._count(
            f"message number {i:04d} of a long session")
        assert len(tokens._counts) <= 10
    tokens.clear_cache()
