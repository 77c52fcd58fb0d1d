"""Talaria's version: one source, the installed distribution's metadata (pyproject.toml)."""

from __future__ import annotations

import functools

DISTRIBUTION = "talaria"
UNKNOWN = "unknown"


@functools.cache
def version() -> str:
    """The installed `talaria` distribution's version, or "unknown" when it is not installed.

    `importlib.metadata` costs a few milliseconds to import, so it is imported here, on first
    use (`talaria --version`, `initialize`), not at start-up.
    """
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as distribution_version

    try:
        return distribution_version(DISTRIBUTION)
    except PackageNotFoundError:
        return UNKNOWN
