"""`ToolContext`: what a tool handler gets besides its arguments (its session's workspace,
tool state, and ways to report progress and call other tools)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from talaria.tools.state import ToolState
from talaria.tools.workspace import Workspace

if TYPE_CHECKING:
    from talaria.tools.sandbox.tiers import SandboxSpec


@dataclass(slots=True)
class ToolContext:
    """What a tool handler gets besides its arguments."""

    workspace: Workspace
    session_id: str = ""
    tool_call_id: str = ""
    state: ToolState = field(default_factory=ToolState)
    """The session's tool state (todo list, execute_code kernel...)."""
    report: Callable[[dict[str, Any]], Awaitable[None]] | None = None
    """Send an intermediate update of this call to the front door, e.g.
    {"terminal_id": "..."} or {"plan": [...]}."""
    call_tool: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]] | None = None
    """Dispatch another tool through the same checks (used by execute_code)."""
    sandbox: SandboxSpec | None = None
    """Set when the user has not seen this call: the processes it starts run confined by it."""
    conceal: Callable[[Path], bool] | None = None
    """Paths whose contents this call must not show (secrets it was not allowed to target)."""
    nested: bool = False
    """The call comes from a script (execute_code), not straight from the model."""

    @property
    def cwd(self) -> Path:
        return self.workspace.cwd
