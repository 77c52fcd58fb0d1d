"""ACP's session methods over the session host: new, load, resume, fork (unstable), list,
close, delete, and modes / config options. Each turns params into a host call and the host's
answer (or error) into ACP's; what follows a session's opening (`announce`: its commands, its
plan) is sent right after the response.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from talaria.acp_server.jsonrpc import Peer, Reply, RpcError
from talaria.acp_server.learning import CommandsUpdates
from talaria.acp_server.opening import options_json, state_json
from talaria.acp_server.params import (
    ClientInfo,
    cwd_param,
    dirs_param,
    mcp_servers_param,
    param,
    quoted,
)
from talaria.agent.host import ModelFailure, NoSuchSession, RootsInUse, SessionHost

if TYPE_CHECKING:
    from talaria.agent.door import FrontDoor
    from talaria.agent.providers.base import Provider
    from talaria.agent.session import Session
    from talaria.tools.mcp.settings import ServerSpec
    from talaria.tools.workspace import Workspace


LIST_PAGE = 50


class AcpDoors:
    """The host's `Doors` for ACP: tools through the editor, events as `session/update`."""

    def __init__(self, peer: Peer, client: ClientInfo) -> None:
        self.peer = peer
        self.client = client
        self.host: SessionHost | None = None
        self.config_options: Any = None
        """Session -> its `configOptions` (set by `AcpSessions`)."""

    def workspace(self, session_id: str, cwd: Path, roots: tuple[Path, ...]) -> Workspace:
        from talaria.acp_server.editor_workspace import EditorWorkspace
        from talaria.tools.local.workspace import LocalWorkspace

        return EditorWorkspace(self.peer, session_id, self.client.capabilities,
                               LocalWorkspace(cwd, roots))

    def door(self, session_id: str, workspace: Workspace) -> FrontDoor:
        from talaria.acp_server.door import AcpDoor

        assert self.host is not None
        host = self.host
        return AcpDoor(
            self.peer, session_id, workspace, compaction_updates=self.client.compaction,
            config_options=lambda: self.config_options(host.sessions[session_id]),
            on_editor_gone=lambda: host.cancel(session_id),
            elicitation=self.client.has("elicitation", "form"),
            subagents=isinstance(self.client.capabilities.get("subagents"), dict),
            notices=self.client.has("session", "notices"),
        )


def session_error(exc: NoSuchSession) -> RpcError:
    where = "was saved" if exc.saved else "is open"
    return RpcError.resource_not_found(f"no session {quoted(exc.session_id)} {where}",
                                       sessionId=exc.session_id)


class AcpSessions:
    def __init__(self, host: SessionHost, peer: Peer, client: ClientInfo,
                 commands: CommandsUpdates) -> None:
        self.host = host
        self.peer = peer
        self.client = client
        self.commands = commands

    def session(self, params: dict[str, Any]) -> Session:
        try:
            return self.host.get(param(params, "sessionId"))
        except NoSuchSession as exc:
            raise session_error(exc) from None

    async def open_new(self, session_id: str, cwd: Path, dirs: tuple[Path, ...],
                       servers: tuple[ServerSpec, ...], provider: Provider) -> Session:
        """The session `session/new` answered for (`opening.Openings`), built now."""
        return await self._opened(self.host.open(cwd, mcp_servers=servers, additional_dirs=dirs,
                                                 session_id=session_id, provider=provider))

    async def load(self, params: dict[str, Any]) -> Reply:
        from talaria.acp_server.history import replay

        session = await self._restore(params)
        tools = {t.name: t for t in session.current_tools()}
        assert session.store is not None

        async def notify(update: dict[str, Any]) -> None:
            await self.peer.notify("session/update", {"sessionId": session.id, "update": update})

        await replay(session.store, session.id, tools, notify,
                     compaction_updates=self.client.compaction)
        return Reply(self.state(session), then=self.announce(session))

    async def resume(self, params: dict[str, Any]) -> Reply:
        session = await self._restore(params)
        return Reply(self.state(session), then=self.announce(session))

    async def _restore(self, params: dict[str, Any]) -> Session:
        session_id = param(params, "sessionId")
        cwd = cwd_param(params)
        dirs = dirs_param(params, cwd)
        servers = tuple(mcp_servers_param(params))
        return await self._opened(self.host.restore(session_id, cwd, mcp_servers=servers,
                                                    additional_dirs=dirs))

    async def fork(self, params: dict[str, Any]) -> Reply:
        """Unstable `session/fork`: a new session with the transcript up to now; the editor's
        `mcpServers` are connected as for new/load/resume."""
        source_id = param(params, "sessionId")
        cwd = cwd_param(params)
        dirs = dirs_param(params, cwd)
        servers = tuple(mcp_servers_param(params))
        session = await self._opened(self.host.fork(source_id, cwd, mcp_servers=servers,
                                                    additional_dirs=dirs))
        return Reply({"sessionId": session.id, **self.state(session)},
                     then=self.announce(session, plan=True))

    async def _opened(self, opening: Any) -> Session:
        try:
            session: Session = await opening
        except NoSuchSession as exc:
            raise session_error(exc) from None
        except ModelFailure as exc:
            raise RpcError.from_model(exc) from None
        except RootsInUse as exc:
            raise RpcError.invalid_params(str(exc)) from None
        return session

    async def list_sessions(self, params: dict[str, Any]) -> dict[str, Any]:
        from talaria.acp_server import updates
        from talaria.acp_server.params import parse_cursor
        from talaria.agent.runtime import stored_dirs

        cwd, cursor = params.get("cwd"), params.get("cursor")  # strings or None (ACP_CHECKS)
        before = parse_cursor(cursor) if cursor else None
        records = self.host.store.list_sessions(cwd=cwd, before=before, limit=LIST_PAGE + 1)
        page = records[:LIST_PAGE]
        result: dict[str, Any] = {"sessions": [
            {"sessionId": r.id, "cwd": r.cwd, "additionalDirectories": stored_dirs(r.meta),
             "title": r.title, "updatedAt": updates.iso(r.updated_at)}
            for r in page
        ]}
        if len(records) > LIST_PAGE:
            result["nextCursor"] = f"{page[-1].updated_at!r}/{page[-1].id}"
        return result

    async def close(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self.session(params)
        await self.host.close(session.id)
        self.commands.forget(session.id)
        return {}

    async def delete(self, params: dict[str, Any]) -> dict[str, Any]:
        session_id = param(params, "sessionId")
        try:
            await self.host.delete(session_id)
        except NoSuchSession as exc:
            raise session_error(exc) from None
        self.commands.forget(session_id)
        return {}

    def announce(self, session: Session, *, plan: bool = False) -> Any:
        """`available_commands_update`, sent right after the new/load/resume response; with
        `plan`, the todo list's plan too (a forked session replays nothing)."""

        async def send() -> None:
            await self.commands.send(session, force=True)  # built-in commands and skills
            if plan and session.tool_state.todos:
                from talaria.acp_server.updates import plan_entries
                from talaria.tools.todo import plan_entries as todo_plan

                entries = plan_entries(todo_plan(session.tool_state.todos))
                await self.peer.notify("session/update", {"sessionId": session.id, "update": {
                    "sessionUpdate": "plan", "entries": entries}})
            await self.host.warm(session)  # the kernel, the model's SDK: before the first prompt

        return send

    # -- modes and config options -----------------------------------------------------------

    def state(self, session: Session) -> dict[str, Any]:
        from talaria.agent.options import values

        return state_json(values(session), self.host.config)

    def config_options(self, session: Session) -> list[dict[str, Any]]:
        from talaria.agent.options import values

        return options_json(values(session), self.host.config)

    async def options_changed(self, session: Session, *, mode: bool) -> None:
        """Tell the editor the session's options (and its mode, with `mode`) are not what
        its opening's answer said."""
        state = self.state(session)
        if mode:
            await self.peer.notify("session/update", {"sessionId": session.id, "update": {
                "sessionUpdate": "current_mode_update",
                "currentModeId": state["modes"]["currentModeId"]}})
        await self.peer.notify("session/update", {"sessionId": session.id, "update": {
            "sessionUpdate": "config_option_update", "configOptions": state["configOptions"]}})

    async def set_mode(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self.session(params)
        await self._set_option(session, "mode", param(params, "modeId"))
        return {}

    async def set_config_option(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self.session(params)
        await self._set_option(session, param(params, "configId"), params.get("value"))
        return {"configOptions": self.config_options(session)}

    async def _set_option(self, session: Session, option: str, value: Any) -> None:
        from talaria.agent.options import OptionError, set_option
        from talaria.agent.providers.errors import AuthError, BillingError, ProviderError

        try:
            await set_option(session, self.host.config, option, value)
        except OptionError as exc:
            raise RpcError.invalid_params(str(exc)) from None
        except (AuthError, BillingError) as exc:
            raise RpcError.auth_required(exc.user_message()) from None
        except ProviderError as exc:  # e.g. a model name its provider does not know
            raise RpcError.invalid_params(exc.user_message()) from None

