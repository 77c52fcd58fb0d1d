"""`LspDoor`: one `talaria lsp` session's front door (see `talaria.agent.door.FrontDoor`).

Events become `talaria/update` notifications shaped like ACP `session/update` params
(`{sessionId, update}`, the update from `acp_server.updates.to_update`), so one client library
renders both doors; the running request's progress and summary are fed from the same events
(`Turn`). Permission questions become `window/showMessageRequest` with Allow once / Always allow
/ Reject; a client that does not advertise it, or that fails it, is never asked again and
gets a refusal: never a hang.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from talaria.acp_server.updates import compaction, to_update
from talaria.agent import events as ev
from talaria.agent.permissions import UNASKED, PermissionAsk
from talaria.tools.handoffs import Clarifier
from talaria.tools.workspace import Workspace

log = logging.getLogger(__name__)

UPDATE = "talaria/update"
ACTIONS = {"Allow once": "allow_once", "Always allow": "allow_always", "Reject": "reject_once"}
"""showMessageRequest action titles -> permission answers."""
PROGRESS_TEXT = 80
"""Characters of a progress message (editors show one line)."""


class Client(Protocol):
    """How the door reaches the editor (`server.TalariaServer` implements it)."""

    def notify(self, method: str, params: dict[str, Any]) -> None: ...

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """The client's result; raises `ClientError` when it answers with an error."""
        ...


class ClientError(Exception):
    """The client answered a request with an error (or cannot take it)."""


@dataclass(slots=True)
class Turn:
    """What one request gathers from its session's events: the answer, the tool calls, the
    files edited; `progress` is fed one line per step (a tool starting, text arriving)."""

    progress: Callable[[str], None] = field(default=lambda message: None)
    answer: list[str] = field(default_factory=list)
    tools: dict[str, str] = field(default_factory=dict)
    """Tool call id -> title, in order."""
    failed: set[str] = field(default_factory=set)
    edited: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.answer).strip()


class LspDoor:
    def __init__(self, client: Client, session_id: str, workspace: Workspace, *,
                 can_ask: bool) -> None:
        self.client = client
        self.session_id = session_id
        self.workspace = workspace
        self.can_ask = can_ask
        """False once `window/showMessageRequest` failed: a base LSP request every client is
        asked with, whatever it advertises (Eglot advertises no `window.showMessage`, which
        only describes message action items, and answers it)."""
        self.on_cannot_ask: Callable[[], None] | None = None
        """Called once when the client turned out not to answer questions."""
        self.turn: Turn | None = None
        """The request being served, while one runs."""

    clarifier: Clarifier | None = None
    """`clarify` has no question UI over LSP: the tool tells the model so."""

    @property
    def root(self) -> LspDoor:
        return self

    async def emit(self, event: ev.Event) -> None:
        turn = self.turn
        if isinstance(event, ev.Compacted):
            for part in compaction(event, client_supports=False):
                self.send(part)
        elif isinstance(event, ev.OptionChanged):
            if event.option == "mode":
                self.send({"sessionUpdate": "current_mode_update", "currentModeId": event.value})
        elif (update := to_update(event)) is not None:
            self.send(update)
        if turn is not None:
            _gather(turn, event)

    def send(self, update: dict[str, Any]) -> None:
        self.client.notify(UPDATE, {"sessionId": self.session_id, "update": update})

    async def notice(self, text: str) -> None:
        """A message for the user outside the model's text (`Notice`)."""
        await self.emit(ev.Notice(text))

    async def ask(self, ask: PermissionAsk) -> str:
        if not self.can_ask:
            return UNASKED
        if self.turn is not None:
            self.turn.progress(f"Waiting for your answer: {ask.title}")
        message = f"Talaria wants to {_verb(ask)}: {ask.title}"
        if ask.reason not in ("edit", "command"):
            message += f" (asking because: {ask.reason})"
        try:
            chosen = await self.client.request("window/showMessageRequest", {
                "type": 3, "message": message,
                "actions": [{"title": title} for title in ACTIONS],
            })
        except ClientError as exc:
            log.warning("window/showMessageRequest failed (%s): no more questions", exc)
            self.can_ask = False
            if self.on_cannot_ask is not None:
                self.on_cannot_ask()
            return UNASKED
        title = chosen.get("title") if isinstance(chosen, dict) else None
        return ACTIONS.get(title, "reject_once") if title is not None else "reject_once"


def _verb(ask: PermissionAsk) -> str:
    return {"edit": "edit", "execute": "run a command", "delete": "delete",
            "move": "move", "read": "read", "fetch": "fetch"}.get(ask.kind, "use a tool")


def _gather(turn: Turn, event: ev.Event) -> None:
    match event:
        case ev.TextChunk(text=text):
            if not turn.answer or turn.answer[-1].endswith("\n"):
                turn.progress(_line(text))
            turn.answer.append(text)
        case ev.ToolCallStarted(id=call_id, title=title):
            turn.tools[call_id] = title
            turn.progress(_line(title))
        case ev.ToolCallFinished(id=call_id, status=status):
            if status == "failed":
                turn.failed.add(call_id)
        case ev.Notice(text=text):
            turn.notices.append(text)


def _line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= PROGRESS_TEXT else line[: PROGRESS_TEXT - 1] + "…"
