"""The local web server for the web tool tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks.webserver import PageServer


@pytest.fixture
def web() -> Iterator[PageServer]:
    with PageServer() as server:
        yield server
