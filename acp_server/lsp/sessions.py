"""The agent side of `talaria lsp`: its session, and one request at a time run through it.

The editor has one current session (built on first use, replaced by `talaria.newSession`),
kept in the same SQLite store as ACP sessions. A request (`talaria.ask`, `.fix`, `.explain`)
runs one turn with a cancellable work-done progress, streams `talaria/update` through the
session's door, then logs a summary (`window/logMessage`), appends to the session's markdown
transcript and opens it at the new answer (`window/showDocument`) when the client can.
Protocol errors are `LspFailure`s: the server turns them into LSP error responses.
"""

from __future__ import annotations

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
    from talaria.agent.session import Session
    from talaria.agent.store import Store
    from talaria.tools.execute_code.pool import KernelPool

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


class LspAgent:
    def __init__(self, client: Editor, config: Config, workspace: DocumentWorkspace, *,
                 can_ask: bool, mode: str, model: str | None) -> None:
        self.client = client
        self.config = config
        self.workspace = workspace
        self.can_ask = can_ask
        self.mode = mode
        self.model = model
        self.session: Session | None = None
        self.running: Running | None = None
        self._store: Store | None = None
        self._kernels: KernelPool | None = None
        self._tokens = itertools.count(1)
        workspace.on_edit = self._edited

    # -- sessions -----------------------------------------------------------------------------

    def current(self) -> Session:
        return self.session or self.new_session()

    def new_session(self) -> Session:
        from talaria.agent.providers.errors import ProviderError
        from talaria.agent.runtime import make_provider, new_session, new_session_id, open_store
        from talaria.tools.execute_code.pool import KernelPool

        try:
            provider = make_provider(self.config, self.model)
        except ProviderError as exc:
            raise LspFailure(REQUEST_FAILED, exc.user_message()) from None
        if self.running is not None:
            self.running.scope.cancel()
        if self.session is not None:
            self.session.close()
        if self._store is None:
            self._store = open_store(self.config)
        if self._kernels is None:
            self._kernels = KernelPool()
        session_id = new_session_id()
        door = LspDoor(self.client, session_id, self.workspace, can_ask=self.can_ask)
        self.session = new_session(
            self.config, cwd=self.workspace.cwd, door=door, provider=provider, store=self._store,
            session_id=session_id, mode=self.mode, kernels=self._kernels, prestart=True,
        )
        return self.session

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
        if self._store is not None:
            self._store.close()

    # -- cancelling --------------------------------------------------------------------------

    def cancel(self) -> bool:
        """Stop the running request (talaria.cancel); False when none runs."""
        running = self.running
        if running is None:
            return False
        if not running.session.cancel():
            running.scope.cancel()  # the request has not reached its turn yet
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
        """Run `content` (a prompt, or a slash command) as one turn of the current session."""
        from talaria.agent import commands
        from talaria.agent.loop import run_turn
        from talaria.agent.providers.errors import ProviderError

        if self.running is not None:
            raise LspFailure(REQUEST_FAILED, "Talaria is still working on the previous request: "
                             "wait for it, or cancel it (talaria.cancel)")
        session = self.current()
        door = session.door
        assert isinstance(door, LspDoor)
        token = await self._progress_token(token)
        scope = anyio.CancelScope()
        self.running = Running(request_id, token, scope, session)
        turn = door.turn = Turn(progress=lambda message: self._report(token, message))
        self._progress(token, {"kind": "begin", "title": "Talaria", "cancellable": True,
                               "message": _first_line(title)})
        started = time.monotonic()
        reason = "cancelled"
        try:
            with scope:
                command = commands.parse(content)
                if command is not None:
                    reason = await commands.run(session, self.config, *command)
                else:
                    reason = await run_turn(session, content)
        except commands.CommandError as exc:
            raise LspFailure(INVALID_PARAMS, str(exc)) from None
        except ProviderError as exc:
            raise LspFailure(REQUEST_FAILED, exc.user_message()) from None
        finally:
            door.turn = None
            self.running = None
            summary = _summary(title, reason, turn, time.monotonic() - started)
            self._progress(token, {"kind": "end", "message": summary})
            self.client.notify("window/logMessage", {"type": INFO, "message": f"Talaria: {summary}"})
        return await self._finish(session, title, reason, turn)

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
