"""The built-in tools: importing their modules registers them in `REGISTRY`."""

from __future__ import annotations

from talaria.tools.registry import REGISTRY, Registry

CORE_TOOLS = (
    "read_file", "write_file", "patch", "search_files", "terminal", "process", "todo",
    "execute_code", "session_search", "delegate_task", "clarify",
)
LEARNING_TOOLS = ("skills_list", "skill_view", "skill_manage", "memory")
"""Skills and memory: what makes the agent better at a user's work over time."""
DEFAULT_TOOLS = CORE_TOOLS + LEARNING_TOOLS
"""What an interactive session gets (batch runs keep to CORE_TOOLS)."""


def load_builtin_tools() -> Registry:
    """Import every built-in tool module (registering it) and return the registry."""
    from talaria.tools import (  # noqa: F401
        clarify,
        delegate_task,
        memory,
        patch,
        process,
        read_file,
        search_files,
        session_search,
        terminal,
        todo,
        vision_analyze,  # offered where it can work (talaria.agent.vision.offered)
        write_file,
    )
    from talaria.tools.execute_code import tool  # noqa: F401
    from talaria.tools.skills import tools as skill_tools  # noqa: F401
    from talaria.tools.web import web_extract, web_search  # noqa: F401  (offered when configured)

    return REGISTRY
