"""Shared fixtures. Keep this small: put helpers next to the tests that use them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakellm import FakeLLM


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A running fake LLM server (OpenAI + Anthropic wire formats) on 127.0.0.1."""
    with FakeLLM() as llm:
        yield llm
