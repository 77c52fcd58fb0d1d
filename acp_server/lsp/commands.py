"""Talaria's `workspace/executeCommand` commands (see `prompts` for their arguments).

Each returns JSON: `talaria.ask` / `.fix` / `.explain` `{sessionId, stopReason, answer,
edited, transcript}` when the turn ends; `talaria.cancel` `{cancelled}`; `talaria.newSession`
`{sessionId}`. Bad arguments are InvalidParams (-32602), a request that cannot run now (busy,
no model configured) RequestFailed (-32803); the session lives on either way.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any, Protocol

from pygls.exceptions import JsonRpcException

from talaria.acp_server.lsp import prompts
from talaria.acp_server.lsp.documents import DocumentWorkspace
from talaria.acp_server.lsp.sessions import INVALID_PARAMS, LspAgent, LspFailure
from talaria.tools.workspace import WorkspaceError


class Host(Protocol):
    """The server the commands run in (`server.TalariaServer`; named here, not imported:
    the server imports this module)."""

    agent: LspAgent | None
    documents: DocumentWorkspace | None
    protocol: Any

    @property
    def encoding(self) -> str: ...

    def start_agent(self) -> LspAgent: ...

    def command(self, name: str) -> Callable[[Any], Any]: ...


def register(server: Host, work_done: contextvars.ContextVar[Any]) -> None:
    """Register the commands on `server`. Handlers take `ls: Any`: pygls evaluates their
    annotations at call time, and the server's class is only a name here."""

    async def run(ls: Host, title: str, make: Any) -> dict[str, Any]:
        agent = ls.start_agent()
        request_id, token = ls.protocol.msg_id, work_done.get()
        try:
            content = await make(ls)
            return await agent.run(title, content, request_id=request_id, token=token)
        except prompts.ArgumentError as exc:
            raise JsonRpcException(str(exc), code=INVALID_PARAMS) from None
        except LspFailure as exc:
            raise JsonRpcException(exc.message, code=exc.code) from None

    @server.command("talaria.ask")
    async def ask(ls: Any, *args: Any) -> dict[str, Any]:
        async def make(ls: Host) -> str:
            prompt, raw = prompts.split_ask(list(args))
            target = await _target(ls, raw) if raw is not None else None
            return prompts.ask_prompt(prompt, target, _rel(ls, target), ls.encoding)

        title = args[0] if args and isinstance(args[0], str) else "Ask about the selection"
        return await run(ls, f"Ask: {title}", make)

    @server.command("talaria.fix")
    async def fix(ls: Any, *args: Any) -> dict[str, Any]:
        async def make(ls: Host) -> str:
            target = await _target(ls, prompts.target_arg("talaria.fix", list(args)))
            return prompts.fix_prompt(target, _rel(ls, target), ls.encoding)

        return await run(ls, f"Fix: {_where(args)}", make)

    @server.command("talaria.explain")
    async def explain(ls: Any, *args: Any) -> dict[str, Any]:
        async def make(ls: Host) -> str:
            target = await _target(ls, prompts.target_arg("talaria.explain", list(args)))
            return prompts.explain_prompt(target, _rel(ls, target), ls.encoding)

        return await run(ls, f"Explain: {_where(args)}", make)

    @server.command("talaria.cancel")
    def cancel(ls: Any, *args: Any) -> dict[str, Any]:
        return {"cancelled": ls.agent.cancel() if ls.agent is not None else False}

    @server.command("talaria.newSession")
    async def fresh_session(ls: Any, *args: Any) -> dict[str, Any]:
        try:
            session = await ls.start_agent().fresh_session()
        except LspFailure as exc:
            raise JsonRpcException(exc.message, code=exc.code) from None
        return {"sessionId": session.id}


async def _target(ls: Host, raw: dict[str, Any]) -> prompts.Target:
    """The document range `raw` names, checked against the document's text."""
    uri = raw.get("uri")
    path = prompts.path_of(uri)
    assert ls.documents is not None and isinstance(uri, str)
    if ls.documents.editor.document(path) is None:  # an open buffer is the editor's text
        prompts.check_file(path)
    try:
        text = await ls.documents.read_text(path)
    except FileNotFoundError:
        raise prompts.ArgumentError(f"{path} does not exist (not open in the editor, not on disk)") from None
    except (OSError, WorkspaceError) as exc:
        raise prompts.ArgumentError(f"cannot read {path}: {exc}") from None
    return prompts.Target(uri, path, prompts.check_range(raw.get("range"), text, uri), text,
                          prompts.diagnostics_of(raw))


def _rel(ls: Host, target: prompts.Target | None) -> str:
    if target is None or ls.documents is None:
        return ""
    try:
        return str(target.path.relative_to(ls.documents.cwd))
    except ValueError:
        return str(target.path)


def _where(args: tuple[Any, ...]) -> str:
    raw = args[0] if args and isinstance(args[0], dict) else {}
    uri = raw.get("uri")
    name = uri.rsplit("/", 1)[-1] if isinstance(uri, str) else "?"
    try:
        line = int(raw["range"]["start"]["line"]) + 1
    except (KeyError, TypeError, ValueError):
        return name
    return f"{name}:{line}"
