"""Fixtures shared by the tools' tests."""

from __future__ import annotations

import shutil

import pytest

from talaria.tools.local import search as local_search


@pytest.fixture(params=["rg", "python"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "rg":
        if shutil.which("rg") is None:
            pytest.skip("ripgrep not installed")
    else:
        monkeypatch.setattr(local_search, "ripgrep_path", lambda: None)
    return request.param
