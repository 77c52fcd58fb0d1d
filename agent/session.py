"""A session: one conversation, its transcript, its tools and its workspace."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from talaria.agent.permissions import Permissions
from talaria.agent.providers.base import Message, Provider
from talaria.agent.store import Store
from talaria.tools.registry import ToolSpec
from talaria.tools.workspace import Workspace


@dataclass(slots=True)
class Session:
    cwd: Path
    workspace: Workspace
    provider: Provider
    tools: list[ToolSpec]
    permissions: Permissions
    context_window: int
    store: Store | None = None
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    messages: list[Message] = field(default_factory=list)
    """The live context sent to the model (the store keeps the full transcript)."""
    max_turns: int = 90
    supports_images: bool = True
    """False: image parts of prompts are replaced by a note (the model cannot take them)."""
    compact_threshold: float = 0.8
    """Compact automatically at this share of the context window."""
    max_tokens: int | None = None
    state: dict[str, Any] = field(default_factory=dict)
    """Per-session tool state: todo list, execute_code kernel, ..."""
    title: str | None = None
    last_usage: int = 0
    """Context tokens in use after the last model call."""
    cancel_scope: Any = None
    """The running turn's anyio.CancelScope; `cancel()` stops it."""

    def cancel(self) -> bool:
        """Stop the running turn, if any. A cancel with no turn running is a no-op."""
        if self.cancel_scope is None:
            return False
        self.cancel_scope.cancel()
        return True

    def close(self) -> None:
        """End the session: stop its turn and run the cleanups tools registered in
        `state["on_close"]` (name -> callable), e.g. execute_code's kernel."""
        self.cancel()
        for cleanup in self.state.pop("on_close", {}).values():
            cleanup()

    def append(self, message: Message) -> None:
        """Add a message to the context and commit it to the transcript at once."""
        self.messages.append(message)
        if self.store is not None:
            self.store.append(self.id, message)

    def tool(self, name: str) -> ToolSpec | None:
        return next((spec for spec in self.tools if spec.name == name), None)

    def tool_definitions(self) -> list[dict[str, Any]]:
        return [spec.definition() for spec in self.tools]
