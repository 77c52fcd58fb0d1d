"""The agent side of `talaria lsp`: its session, and one request at a time run through it.

The editor has one current session (built on first use, replaced by `talaria.newSession`) on
a `SessionHost`, as ACP's are: the configured execution environment (a bad one falls back to
local with a warning), the same store, the background review after a request's answer. A request (`talaria.ask`, `.fix`, `.explain`)
runs one turn with a cancellable work-done progress, streams `talaria/update` through the
session's door, then logs a summary (`window/logMessage`), appends to the session's markdown
transcript and opens it at the new answer (`window/showDocument`) when the client can.
Protocol errors are `LspFailure`s: the server turns them into LSP error responses.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from talaria.acp_server.lsp import transcript
from talaria.acp_server.lsp.documents import DocumentWorkspace
from talaria.acp_server.lsp.door import Client, LspDoor, Turn
from talaria.agent.config import Config

if TYPE_CHECKING:
    from talaria.agent.door import FrontDoor
    from talaria.agent.host import After
    from talaria.agent.session import Session
    from talaria.tools.workspace import Workspace

log = logging.getLogger(__name__)

INVALID_PARAMS = -32602
REQUEST_FAILED = -32803
"""LSP's RequestFailed: the request was valid but could not be carried out."""
INFO = 3


class LspFailure(Exception):
    """A request that fails: `code` and a one-line message (cause + what to do)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Editor(Client, Protocol):
    """The client, with what a request needs to know of it (`server.TalariaServer`)."""

    def progress_supported(self) -> bool: ...

    def show_document_supported(self) -> bool: ...

    def uri(self, path: Path) -> str: ...


@dataclass(slots=True)
class Running:
    request_id: Any
    token: Any
    scope: anyio.CancelScope
    session: Session


class LspDoors:
    """The host's `Doors` for LSP: tools through the open buffers, events as `talaria/update`."""

    def __init__(self, client: Editor, workspace: DocumentWorkspace, *,
                 unattended: str | None) -> None:
        self.client = client
        self.documents = workspace
        self.unattended = unattended
        """The mode a session switches to when the client cannot answer questions (None: the
        user chose a mode; it holds)."""
        self.sessions: dict[str, Session] = {}

    def workspace(self, session_id: str, cwd: Path, roots: tuple[Path, ...]) -> Workspace:
        return self.documents  # its roots: the client's workspace folders (`_start_agent`)

    def door(self, session_id: str, workspace: Workspace) -> FrontDoor:
        door = LspDoor(self.client, session_id, workspace, can_ask=True)

        def cannot_ask() -> None:  # the next calls go by the unattended mode, not a refusal
            session = self.sessions.get(session_id)
            if session is not None and self.unattended is not None:
                session.permissions.mode = self.unattended

        door.on_cannot_ask = cannot_ask
        return door


class LspAgent:
    """The editor's current session on a `SessionHost` (the same one ACP uses: environments,
    the background review, cancel), one request at a time."""

    def __init__(self, client: Editor, config: Config, workspace: DocumentWorkspace, *,
                 unattended: str | None, mode: str, model: str | None) -> None:
        from talaria.agent.host import SessionHost

        self.client = client
        self.config = config
        self.workspace = workspace
        self.mode = mode
        self.model = model
        self.doors = LspDoors(client, workspace, unattended=unattended)
        self.host = SessionHost(config, self.doors, editor=True)
        self.doors.sessions = self.host.sessions
        self.session: Session | None = None
        self.running: Running | None = None
        self._tokens = itertools.count(1)
        self._after: set[asyncio.Task[None]] = set()
        workspace.on_edit = self._edited

    # -- sessions -----------------------------------------------------------------------------

    async def current(self) -> Session:
        return self.session or await self.fresh_session()

    async def fresh_session(self) -> Session:
        from talaria.agent.host import ModelFailure

        if self.running is not None:
            self.running.scope.cancel()
        if self.session is not None and self.session.id in self.host.sessions:
            await self.host.close(self.session.id)
        self.session = None
        try:
            self.session = await self.host.open(self.workspace.cwd, model=self.model, mode=self.mode,
                                                additional_dirs=tuple(self.workspace.roots[1:]))
        except ModelFailure as exc:
            raise LspFailure(REQUEST_FAILED, exc.message) from None
        return self.session

    def close(self) -> None:
        self.host.close_all()

    # -- cancelling --------------------------------------------------------------------------

    def cancel(self) -> bool:
        """Stop the running request (talaria.cancel); False when none runs."""
        running = self.running
        if running is None:
            return False
        if not self.host.cancel(running.session.id):
            running.scope.cancel()  # the request has not reached the host yet
        return True

    def cancel_request(self, request_id: Any) -> bool:
        """Stop the request `request_id` if it is the one running (True)."""
        if self.running is not None and self.running.request_id == request_id:
            return self.cancel()
        return False

    def cancel_progress(self, token: Any) -> None:
        if self.running is not None and self.running.token == token:
            self.cancel()

    # -- one request -------------------------------------------------------------------------

    async def run(self, title: str, content: str, *, request_id: Any = None,
                  token: Any = None) -> dict[str, Any]:
        """Run `content` (a prompt, or a slash command) as one turn of the current session;
        the background review, when one is due, runs after the answer is returned."""
        from talaria.agent.commands import CommandError
        from talaria.agent.host import ModelFailure

        if self.running is not None:
            raise LspFailure(REQUEST_FAILED, "Talaria is still working on the previous request: "
                             "wait for it, or cancel it (talaria.cancel)")
        session = await self.current()
        door = session.door
        assert isinstance(door, LspDoor)
        token = await self._progress_token(token)
        scope = anyio.CancelScope()
        self.running = Running(request_id, token, scope, session)
        turn = door.turn = Turn(progress=lambda message: self._report(token, message))
        self._progress(token, {"kind": "begin", "title": "Talaria", "cancellable": True,
                               "message": _first_line(title)})
        started = time.monotonic()
        reason, after = "cancelled", None
        try:
            with scope:
                outcome = await self.host.prompt(session, content)
                reason, after = outcome.stop_reason, outcome.after
        except CommandError as exc:
            raise LspFailure(INVALID_PARAMS, str(exc)) from None
        except ModelFailure as exc:
            raise LspFailure(REQUEST_FAILED, exc.message) from None
        finally:
            door.turn = None
            self.running = None
            summary = _summary(title, reason, turn, time.monotonic() - started)
            self._progress(token, {"kind": "end", "message": summary})
            self.client.notify("window/logMessage", {"type": INFO, "message": f"Talaria: {summary}"})
        answer = await self._finish(session, title, reason, turn)
        if after is not None:
            self._later(after)
        return answer

    def _later(self, after: After) -> None:
        """Run `after` (the review) on pygls' asyncio loop once the answer is on its way."""

        async def run() -> None:
            await after()

        task = asyncio.get_running_loop().create_task(run())
        self._after.add(task)
        task.add_done_callback(self._after.discard)

    async def _finish(self, session: Session, title: str, reason: str, turn: Turn) -> dict[str, Any]:
        path = transcript.transcript_path(self.config.home, session.id)
        line = await anyio.to_thread.run_sync(lambda: transcript.append(
            path, title=title, answer=turn.text, tools=list(turn.tools.values()),
            edited=turn.edited, stop_reason=reason))
        uri = self.client.uri(path)
        if turn.text and self.client.show_document_supported():
            here = {"line": line, "character": 0}
            try:
                await self.client.request("window/showDocument", {
                    "uri": uri, "takeFocus": True, "selection": {"start": here, "end": here}})
            except Exception as exc:  # a failed convenience: the answer is still returned
                log.warning("window/showDocument failed: %s", exc)
        return {"sessionId": session.id, "stopReason": reason, "answer": turn.text,
                "edited": turn.edited, "transcript": uri}

    async def _edited(self, path: Path) -> None:
        if self.running is not None and (turn := self.running.session.door.turn) is not None:  # type: ignore[attr-defined]
            shown = _relative(path, self.workspace.cwd)
            if shown not in turn.edited:
                turn.edited.append(shown)

    # -- progress ----------------------------------------------------------------------------

    async def _progress_token(self, given: Any) -> Any:
        """The client's work-done token, else one we create (None: no progress)."""
        if given is not None:
            return given
        if not self.client.progress_supported():
            return None
        token = f"talaria-{next(self._tokens)}"
        try:
            await self.client.request("window/workDoneProgress/create", {"token": token})
        except Exception as exc:
            log.warning("window/workDoneProgress/create failed: %s", exc)
            return None
        return token

    def _progress(self, token: Any, value: dict[str, Any]) -> None:
        if token is not None:
            self.client.notify("$/progress", {"token": token, "value": value})

    def _report(self, token: Any, message: str) -> None:
        self._progress(token, {"kind": "report", "message": message})


def _summary(title: str, reason: str, turn: Turn, seconds: float) -> str:
    parts = [f"{_first_line(title)}: {reason.replace('_', ' ')} in {seconds:.1f} s"]
    if turn.tools:
        failed = f" ({len(turn.failed)} failed)" if turn.failed else ""
        parts.append(f"{len(turn.tools)} tool call(s){failed}")
    if turn.edited:
        parts.append("edited " + ", ".join(turn.edited))
    return "; ".join(parts)


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "Request"
    return line if len(line) <= 60 else line[:59] + "…"


def _relative(path: Path, cwd: Path) -> str:
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)
