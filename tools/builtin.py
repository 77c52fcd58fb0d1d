"""The built-in tools: importing their modules registers them in `REGISTRY`."""

from __future__ import annotations

from talaria.tools.registry import REGISTRY, Registry

CORE_TOOLS = (
    "read_file", "write_file", "patch", "search_files", "terminal", "todo", "execute_code",
)


def load_builtin_tools() -> Registry:
    """Import every built-in tool module (registering it) and return the registry."""
    from talaria.tools import (  # noqa: F401
        patch,
        read_file,
        search_files,
        terminal,
        todo,
        write_file,
    )
    from talaria.tools.execute_code import tool  # noqa: F401
    from talaria.tools.web import web_extract, web_search  # noqa: F401  (offered when configured)

    return REGISTRY
