"""The seam between a session and the front door that serves it (ACP, LSP, the CLI, a batch).

A session is built with one `FrontDoor`, bound to that session: events go out through `emit`,
permission questions through `ask`, and tools act through `workspace`. The door knows the
session's id before the session exists (the id is made first), so nothing is patched in later.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from talaria.agent.permissions import PermissionAsk, deny_all
from talaria.tools.handoffs import Clarifier
from talaria.tools.workspace import Workspace

if TYPE_CHECKING:  # events are imported with the turn's modules, after a session's opening
    from talaria.agent.events import Event


class FrontDoor(Protocol):
    @property
    def workspace(self) -> Workspace:
        """Where the session's tools read, write and run (an editor's, a container's, the disk)."""
        ...

    async def emit(self, event: Event) -> None:
        """Send one event to the user (text, tool cards, plan, notices...)."""
        ...

    async def ask(self, ask: PermissionAsk) -> str:
        """Ask the user about a tool call: one of `permissions.OPTIONS`, or "cancelled"."""
        ...

    @property
    def clarifier(self) -> Clarifier | None:
        """How this door asks the user the `clarify` tool's questions; None: it cannot."""
        ...

    @property
    def root(self) -> FrontDoor:
        """The door of the user's session: itself, except a subagent's (its parent's root)."""
        ...


async def _drop(event: Event) -> None:
    return None


@dataclass(slots=True)
class LocalDoor:
    """A door for callers in this process (`talaria run`, batch workers, tests, benchmarks):
    events to `on_event`, questions to `asker` (refused by default)."""

    workspace: Workspace
    on_event: Callable[[Event], Awaitable[None]] = field(default=_drop)
    asker: Callable[[PermissionAsk], Awaitable[str]] = field(default=deny_all)
    clarifier: Clarifier | None = None

    @property
    def root(self) -> FrontDoor:
        return self

    async def emit(self, event: Event) -> None:
        await self.on_event(event)

    async def ask(self, ask: PermissionAsk) -> str:
        return await self.asker(ask)
