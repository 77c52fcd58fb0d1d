"""Talaria's version, in one place: pyproject.toml reads it from here (`[tool.setuptools.dynamic]`),
so `talaria --version`, `initialize`'s `agentInfo` and the wheel agree, and nothing at start-up
pays for `importlib.metadata` (~15 ms)."""

from __future__ import annotations

VERSION = "0.2.0"


def version() -> str:
    return VERSION
