"""Shared fixtures. Keep this small: put helpers next to the tests that use them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakellm import FakeLLM


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`deep` tests run only when the -m expression names them (deselected, not skipped)."""
    if "deep" in (config.getoption("markexpr") or ""):
        return
    deep = [item for item in items if item.get_closest_marker("deep")]
    if deep:
        config.hook.pytest_deselected(items=deep)
        items[:] = [item for item in items if not item.get_closest_marker("deep")]


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A running fake LLM server (OpenAI + Anthropic wire formats) on 127.0.0.1."""
    with FakeLLM() as llm:
        yield llm
