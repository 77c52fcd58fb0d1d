"""The built-in tools: importing their modules registers them in `REGISTRY`."""

from __future__ import annotations

from tools.registry import REGISTRY, Registry

CORE_TOOLS = (
    "read_file", "write_file", "patch", "search_files", "terminal", "todo", "execute_code",
)


def load_builtin_tools() -> Registry:
    """Import every built-in tool module (registering it) and return the registry."""
    from tools import (  # noqa: F401
        execute_code,
        patch,
        read_file,
        search_files,
        terminal,
        todo,
        write_file,
    )

    return REGISTRY
