"""The built-in tools: importing their modules registers them in `REGISTRY`."""

from __future__ import annotations

from talaria.tools.registry import REGISTRY, Registry

CORE_TOOLS = (
    "read_file", "write_file", "patch", "search_files", "terminal", "todo", "execute_code",
    "delegate_task", "clarify",
)


def load_builtin_tools() -> Registry:
    """Import every built-in tool module (registering it) and return the registry."""
    from talaria.tools import (  # noqa: F401
        clarify,
        delegate_task,
        patch,
        read_file,
        search_files,
        terminal,
        todo,
        write_file,
    )
    from talaria.tools.execute_code import tool  # noqa: F401

    return REGISTRY
