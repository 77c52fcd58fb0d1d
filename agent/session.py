"""A session: one conversation, its transcript, its tools, and the front door it answers to.

Every field is typed and owned by one layer: the agent's own (model, limits, context
accounting) here; the tools' (todo list, execute_code kernel) in `tool_state`, which the agent
passes to tools and closes with the session. Values that come from configuration have no
default here: `agent.runtime.new_session` fills them from `Config`, their one source.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from talaria.agent.context.live import LiveContext
from talaria.agent.door import FrontDoor
from talaria.agent.permissions import Permissions
from talaria.agent.pricing import Spend
from talaria.agent.providers.base import Provider
from talaria.agent.queue import PromptQueue
from talaria.agent.store import Store
from talaria.agent.transcript import ContextRow, Message
from talaria.agent.withheld import Withholding
from talaria.tools.registry import ToolSpec
from talaria.tools.state import ToolState
from talaria.tools.workspace import Workspace

if TYPE_CHECKING:
    from talaria.agent.checkpoints import NestedCheckpoints, TurnCheckpoints
    from talaria.agent.context.summarizer import Summarizer


COMMIT_ON_LOOP_CHARS = 8_000
"""A message up to this long is committed on the event loop (a millisecond); a longer one (a
pasted log, an attached image) in a worker thread: its JSON, its index text and its write held
every other request up 20-80 ms for a 1 MB prompt (issue 29)."""


def _chars(message: Any, depth: int = 0) -> int:
    """The characters of a message's strings, two levels down (content parts, tool calls,
    display items): its size, cheaply."""
    if isinstance(message, str):
        return len(message)
    if depth > 2:
        return 0
    values = message.values() if isinstance(message, dict) else message if isinstance(message, list) else ()
    return sum(_chars(v, depth + 1) for v in values)


@dataclass(slots=True)
class Session:
    id: str
    cwd: Path
    door: FrontDoor
    provider: Provider
    tools: list[ToolSpec]
    """The session's own tools; `current_tools()` adds those of `tool_state.sources`."""
    permissions: Permissions
    store: Store | None
    # From configuration (and changed by options during the session):
    context_window: int
    max_turns: int
    """Model calls allowed per prompt."""
    max_tokens: int | None
    compact_threshold: float
    """Compact automatically at this share of the context window."""
    supports_images: bool
    """False: image parts of prompts are replaced by a note (the model cannot take them)."""
    reasoning_effort: str | None
    additional_dirs: tuple[Path, ...] = ()
    """More roots of the project beside `cwd` (`runtime.Opening.additional_dirs`)."""
    summarizer: Summarizer | None = None
    """Writes compaction summaries; None: the session's own model does."""
    context: LiveContext = field(default_factory=LiveContext)
    """The live context sent to the model, and its token counts (the store keeps the full
    transcript)."""
    tool_state: ToolState = field(default_factory=ToolState)
    title: str | None = None
    token_ratio: float = 1.0
    """The provider's tokens per one of ours (its tokenizer is not cl100k), from the counts its
    last context-overflow error gave (`context.fit`); a property of the model, not of the
    context: it survives compaction and /clear."""
    allowed_tools: frozenset[str] | None = None
    """When set, the only tools a call may dispatch to (the background review's whitelist);
    any other call is refused and logged, whatever `tools` holds."""
    cancel_scope: Any = None
    """The running turn's anyio.CancelScope; `cancel()` stops it."""
    prompts: PromptQueue = field(default_factory=PromptQueue)
    """Prompts waiting for the running turn to end (`/queue`)."""
    steer_notes: list[str] = field(default_factory=list)
    """`/steer` notes for the running turn, taken in before its next model call."""
    checkpoints: TurnCheckpoints | NestedCheckpoints | None = None
    """Snapshots of the project before each turn's first change (`/undo`); None: off."""
    depth: int = 0
    """0 for a user's session, 1 for a subagent it delegated to, 2 for that one's own."""
    withheld: Withholding = field(default_factory=Withholding)
    """Tool calls that reached a secret path, until their results are stored marked."""
    spend: Spend = field(default_factory=Spend)
    """Tokens and cost of its model calls so far (`new_session` gives it the configured prices
    and, for a stored session, its stored total)."""
    _nested_ids: Iterator[int] = field(default_factory=lambda: itertools.count(1), repr=False)

    @property
    def messages(self) -> Sequence[Message]:
        """The live context's messages, to read (`context` changes them)."""
        return self.context.messages

    @property
    def workspace(self) -> Workspace:
        return self.door.workspace

    @property
    def turn_running(self) -> bool:
        return self.cancel_scope is not None

    def cancel(self) -> bool:
        """Stop the running turn, if any. A cancel with no turn running is a no-op."""
        if self.cancel_scope is None:
            return False
        self.cancel_scope.cancel()
        return True

    def close(self) -> None:
        """End the session: stop its turn, then what its tools keep running (a kernel)."""
        self.cancel()
        self.tool_state.close()

    def append(self, message: ContextRow) -> None:
        """Add a message to the context and commit it to the transcript at once."""
        self.context.append(message)
        if self.store is not None:
            self.store.append(self.id, message, self.withheld.quoted)

    async def record(self, message: ContextRow) -> None:
        """`append`, for a message that may be large (a prompt, a tool result): committed in a
        worker thread past `COMMIT_ON_LOOP_CHARS`, and done when this returns."""
        if self.store is None or _chars(message) <= COMMIT_ON_LOOP_CHARS:
            self.append(message)
            return
        self.context.append(message)
        await anyio.to_thread.run_sync(self.store.append, self.id, message, self.withheld.quoted)

    def current_tools(self) -> list[ToolSpec]:
        """The tools offered now: the session's own, then what its sources (MCP servers)
        offer at this moment. Asked at every model call, so the list may change between
        calls; a source's tool never shadows one of the session's own."""
        if not self.tool_state.sources:
            return self.tools
        tools = list(self.tools)
        names = {spec.name for spec in tools}
        for source in self.tool_state.sources:
            for spec in source.specs():
                if spec.name not in names:
                    names.add(spec.name)
                    tools.append(spec)
        return tools

    def tool_notices(self) -> list[str]:
        """What the tool sources have to tell the user since the last call (once each)."""
        return [text for source in self.tool_state.sources for text in source.notices()]

    def tool(self, name: str) -> ToolSpec | None:
        return next((spec for spec in self.current_tools() if spec.name == name), None)

    def tool_definitions(self) -> list[dict[str, Any]]:
        return [spec.definition() for spec in self.current_tools()]

    def nested_call_id(self) -> str:
        """An id for a tool call made from inside another (execute_code), unique per session."""
        return f"nested_{next(self._nested_ids)}"
