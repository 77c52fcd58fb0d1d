"""Shared fixtures. Keep this small: put helpers next to the tests that use them."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakellm import FakeLLM

# No test writes to the user's own $TALARIA_HOME (~/.talaria): the run gets a throwaway one,
# which tests that need their own replace.
os.environ["TALARIA_HOME"] = _home = tempfile.mkdtemp(prefix="talaria-tests-home-")
atexit.register(shutil.rmtree, _home, ignore_errors=True)


SLOW_LIST = Path(__file__).with_name("slow_tests.txt")


def _measured_slow() -> frozenset[str]:
    """The tests `scripts/slow-tests` measured at 0.5 s or more (node ids without parameters)."""
    lines = SLOW_LIST.read_text(encoding="utf-8").splitlines() if SLOW_LIST.exists() else []
    return frozenset(line for line in lines if line and not line.startswith("#"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Measured slow tests get the `slow` mark; `deep` tests run only when the -m expression
    names them (deselected, not skipped)."""
    slow = _measured_slow()
    for item in items:
        if item.nodeid.split("[")[0] in slow:
            item.add_marker(pytest.mark.slow)
    if "deep" in (config.getoption("markexpr") or ""):
        return
    deep = [item for item in items if item.get_closest_marker("deep")]
    if deep:
        config.hook.pytest_deselected(items=deep)
        items[:] = [item for item in items if not item.get_closest_marker("deep")]


MISSING_TOOL = "not installed"
"""The words of every skip for a tool scripts/test installs (rg, luac, emacs, nvim, uv, the npm
MCP server): under scripts/test (TALARIA_TEST_NO_MISSING_TOOLS=1) such a skip is a failure, so
a fresh machine cannot pass by skipping what the command promised to install (issue 28)."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    report = yield
    if (report.skipped and os.environ.get("TALARIA_TEST_NO_MISSING_TOOLS") == "1"
            and isinstance(report.longrepr, tuple) and MISSING_TOOL in str(report.longrepr[2])):
        report.outcome = "failed"
        report.longrepr = (f"skipped for a missing tool that scripts/test installs: "
                           f"{str(report.longrepr[2]).removeprefix('Skipped: ')}")
    return report


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A running fake LLM server (OpenAI + Anthropic wire formats) on 127.0.0.1."""
    with FakeLLM() as llm:
        yield llm
