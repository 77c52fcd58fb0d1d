"""The built-in tools: importing their modules registers them in `REGISTRY`."""

from __future__ import annotations

from tools.registry import REGISTRY, Registry

CORE_TOOLS = ("read_file", "write_file", "patch", "search_files", "terminal", "todo")


def load_builtin_tools() -> Registry:
    """Import every built-in tool module (registering it) and return the registry."""
    from tools import patch, read_file, search_files, terminal, todo, write_file  # noqa: F401

    return REGISTRY
