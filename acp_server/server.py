"""`talaria acp`: the Agent Client Protocol v1 agent on stdio.

Maps protocol methods onto the agent layer; owns no agent logic. Start-up stays light
(no provider SDK import before the first prompt) because editors wait on `initialize`.
"""

from __future__ import annotations

import gc
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from talaria.acp_server import lifecycle
from talaria.acp_server.jsonrpc import Peer, Reply, RpcError
from talaria.acp_server.params import ACP_CHECKS, cwd_param, mcp_servers_param, param, quoted
from talaria.acp_server.sandbox_probe import SandboxProbe
from talaria.acp_server.version import version
from talaria.agent.config import Config

if TYPE_CHECKING:
    from talaria.agent.session import Session
    from talaria.agent.store import Store
    from talaria.tools.execute_code.pool import KernelPool

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
LIST_PAGE = 50
AUTH_METHOD = "setup"


class AcpServer:
    def __init__(self, peer: Peer, config: Config, sandbox: SandboxProbe | None = None) -> None:
        self.peer = peer
        self.config = config
        self.sandbox = sandbox or SandboxProbe()
        self.client_capabilities: dict[str, Any] = {}
        self.sessions: dict[str, Session] = {}
        self.sent_commands: dict[str, dict[str, Any]] = {}
        """Session id -> the last `available_commands_update` sent (skills change it)."""
        self.running: dict[str, anyio.CancelScope] = {}
        """Session id -> the scope of its running `session/prompt` (see `cancel`)."""
        self._store: Store | None = None
        self._kernels: KernelPool | None = None
        """execute_code kernels of all sessions: one pool, so at most MAX_KERNELS live."""
        for method, handler in {
            "initialize": self.initialize, "authenticate": self.authenticate,
            "session/new": self.new_session, "session/load": self.load_session,
            "session/resume": self.resume_session, "session/list": self.list_sessions,
            "session/close": self.close_session, "session/prompt": self.prompt,
            "session/set_mode": self.set_mode, "session/set_config_option": self.set_config_option,
            "session/delete": lambda p: lifecycle.delete_session(self, p),
            "session/fork": lambda p: lifecycle.fork_session(self, p),
            "logout": lambda p: lifecycle.logout(self, p),
        }.items():
            peer.on_request(method, handler)
        peer.on_notification("session/cancel", self.cancel)

    @property
    def store(self) -> Store:
        if self._store is None:  # opened on first use: `initialize` stays instant
            from talaria.agent.runtime import open_store

            self._store = open_store(self.config)
        return self._store

    def close(self) -> None:
        for session in self.sessions.values():
            session.close()
        if self._store is not None:
            self._store.close()

    # -- lifecycle ----------------------------------------------------------------------

    async def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        param(params, "protocolVersion", int)
        caps = params.get("clientCapabilities")
        caps = caps if isinstance(caps, dict) else {}
        if not isinstance(caps.get("fs"), dict):  # `"fs": true` must not crash session/new later
            caps = {**caps, "fs": {}}
        self.client_capabilities = caps
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": True, "sse": True},
                # `fork` is unstable in ACP v1: clients that do not know it ignore it.
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {},
                                        "fork": {}},
                "auth": {"logout": {}},
            },
            "agentInfo": {"name": "talaria", "title": "Talaria", "version": version()},
            "_meta": {"talaria": {"sandbox": await self.sandbox.tier()}},
            "authMethods": [{
                "id": AUTH_METHOD, "name": "Configure a model",
                "description": "Choose a provider and enter its API key (runs `talaria setup`).",
                "type": "terminal", "args": ["setup"],
            }],
        }

    async def authenticate(self, params: dict[str, Any]) -> dict[str, Any]:
        method = param(params, "methodId")
        if method != AUTH_METHOD:
            raise RpcError.invalid_params(f"unknown auth method {method!r}; use {AUTH_METHOD!r}")
        self._provider(None)  # raises auth_required with how-to when nothing is configured
        return {}

    def _provider(self, model: str | None) -> Any:
        from talaria.agent.providers.errors import ProviderError
        from talaria.agent.runtime import make_provider

        try:
            return make_provider(self.config, model)
        except ProviderError as exc:
            raise RpcError.auth_required(exc.user_message()) from None

    def _session(self, params: dict[str, Any]) -> Session:
        session_id = param(params, "sessionId")
        session = self.sessions.get(session_id)
        if session is None:
            raise RpcError.resource_not_found(f"no session {quoted(session_id)} is open",
                                              sessionId=session_id)
        return session

    def _build(self, cwd: Path, *, model: str | None, mode: str | None = None,
               session_id: str | None = None, history: list[Any] | None = None,
               mcp_servers: list[Any] | None = None) -> Session:
        from talaria.acp_server.door import AcpDoor
        from talaria.acp_server.editor_workspace import EditorWorkspace
        from talaria.agent.permissions import MODES
        from talaria.agent.runtime import new_session, new_session_id
        from talaria.tools.execute_code.pool import KernelPool
        from talaria.tools.local.workspace import LocalWorkspace

        provider = self._provider(model)
        if mode is None:  # `bypass` (TALARIA_MODE) is for headless runs: editors ask
            mode = self.config.mode if self.config.mode in MODES else "default"
        session_id = session_id or new_session_id()
        workspace = lifecycle.environment(self.config,
            EditorWorkspace(self.peer, session_id, self.client_capabilities, LocalWorkspace(cwd)),
            session_id)
        door = AcpDoor(
            self.peer, session_id, workspace, compaction_updates=self._client_compaction(),
            config_options=lambda: self._config_options(self.sessions[session_id]),
            on_editor_gone=lambda: self.sessions[session_id].cancel(),
            elicitation=self._client_has("elicitation", "form"),
            subagents=isinstance(self.client_capabilities.get("subagents"), dict),
        )
        if self._kernels is None:
            self._kernels = KernelPool()
        session = new_session(
            self.config, cwd=cwd, door=door, provider=provider, store=self.store, mode=mode,
            session_id=session_id, history=history, kernels=self._kernels, prestart=True,
            mcp_servers=mcp_servers,
        )
        self.sessions[session.id] = session
        return session

    async def new_session(self, params: dict[str, Any]) -> Reply:
        cwd = cwd_param(params)
        session = self._build(cwd, model=None, mcp_servers=mcp_servers_param(params))
        return Reply({"sessionId": session.id, **self._state(session)}, then=lifecycle.announce(self, session))

    async def load_session(self, params: dict[str, Any]) -> Reply:
        from talaria.acp_server.history import replay

        session = await self._restore(params)
        tools = {t.name: t for t in session.current_tools()}
        assert session.store is not None
        await replay(session.store, session.id, tools, lambda u: self._notify(session.id, u),
                     compaction_updates=self._client_compaction())
        return Reply(self._state(session), then=lifecycle.announce(self, session))

    async def resume_session(self, params: dict[str, Any]) -> Reply:
        session = await self._restore(params)
        return Reply(self._state(session), then=lifecycle.announce(self, session))

    async def _restore(self, params: dict[str, Any]) -> Session:
        from talaria.acp_server.history import last_todos
        from talaria.agent.permissions import MODES

        session_id = param(params, "sessionId")
        cwd = cwd_param(params)
        servers = mcp_servers_param(params)
        if session_id in self.sessions:
            return self.sessions[session_id]
        record = self.store.get_session(session_id)
        if record is None:
            raise RpcError.resource_not_found(f"no session {quoted(session_id)} was saved",
                                              sessionId=session_id)
        # A long transcript is megabytes of JSON to parse: in a worker thread (issue 9).
        history = await anyio.to_thread.run_sync(
            lambda: self.store.messages(session_id, include_archived=False))
        if session_id in self.sessions:  # opened by another request meanwhile
            return self.sessions[session_id]
        session = self._build(cwd, model=record.model if ":" in (record.model or "") else None,
                              mode=record.mode if record.mode in MODES else None,
                              session_id=session_id, history=history, mcp_servers=servers)
        session.title = record.title
        if (todos := last_todos(history)) is not None:
            session.tool_state.todos = todos  # the plan survives a restart
        return session

    async def list_sessions(self, params: dict[str, Any]) -> dict[str, Any]:
        from talaria.acp_server import updates
        from talaria.acp_server.params import parse_cursor

        cwd, cursor = params.get("cwd"), params.get("cursor")  # strings or None (ACP_CHECKS)
        before = parse_cursor(cursor) if cursor else None
        records = self.store.list_sessions(cwd=cwd, before=before, limit=LIST_PAGE + 1)
        page = records[:LIST_PAGE]
        result: dict[str, Any] = {"sessions": [
            {"sessionId": r.id, "cwd": r.cwd, "title": r.title, "updatedAt": updates.iso(r.updated_at)}
            for r in page
        ]}
        if len(records) > LIST_PAGE:
            result["nextCursor"] = f"{page[-1].updated_at!r}/{page[-1].id}"
        return result

    async def close_session(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self._session(params)
        session.prompts.clear()  # queued prompts answer `cancelled`, they do not run
        await self.cancel({"sessionId": session.id})
        session.close()  # stops its execute_code kernel (and a background review)
        self.sessions.pop(session.id, None)
        self.sent_commands.pop(session.id, None)
        return {}

    # -- modes and config options ---------------------------------------------------------

    def _state(self, session: Session) -> dict[str, Any]:
        from talaria.agent.options import current_mode, mode_choices

        return {
            "modes": {"currentModeId": current_mode(session), "availableModes": [
                {"id": c.value, "name": c.name, "description": c.description}
                for c in mode_choices()
            ]},
            "configOptions": self._config_options(session),
        }

    def _config_options(self, session: Session) -> list[dict[str, Any]]:
        from talaria.agent.options import options

        return [
            {"id": o.id, "name": o.name, "category": o.category, "type": "select",
             "currentValue": o.current,
             "options": [{"value": c.value, "name": c.name} for c in o.choices]}
            for o in options(session, self.config)
        ]

    async def set_mode(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self._session(params)
        await self._set_option(session, "mode", param(params, "modeId"))
        return {}

    async def set_config_option(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self._session(params)
        await self._set_option(session, param(params, "configId"), params.get("value"))
        return {"configOptions": self._config_options(session)}

    async def _set_option(self, session: Session, option: str, value: Any) -> None:
        from talaria.agent.options import OptionError, set_option
        from talaria.agent.providers.errors import AuthError, BillingError, ProviderError

        try:
            await set_option(session, self.config, option, value)
        except OptionError as exc:
            raise RpcError.invalid_params(str(exc)) from None
        except (AuthError, BillingError) as exc:
            raise RpcError.auth_required(exc.user_message()) from None
        except ProviderError as exc:  # e.g. a model name its provider does not know
            raise RpcError.invalid_params(exc.user_message()) from None

    # -- prompts ----------------------------------------------------------------------------

    async def prompt(self, params: dict[str, Any]) -> dict[str, Any] | Reply:
        """One prompt. While a turn runs, `/steer` and `/queue` act on it at once and anything
        else waits in the session's queue (answered when its own turn ends, in order)."""
        from talaria.acp_server.content import typed_text
        from talaria.agent import commands

        session = self._session(params)
        blocks = params.get("prompt")
        typed = typed_text(blocks) if isinstance(blocks, list) and all(
            isinstance(b, dict) for b in blocks) else ""
        typed = typed if isinstance(typed, str) else ""  # bad blocks: user_content says so
        command = commands.parse(typed)
        if command is not None and command[0] in commands.LIVE:
            return {"stopReason": await self._command(session, *command)}
        async with session.prompts.turn(typed, lambda ahead: lifecycle.queued(session, ahead)) as admitted:
            if not admitted:  # dropped by `/queue clear`
                return {"stopReason": "cancelled"}
            return await self._prompt_turn(session, params, command)

    async def _prompt_turn(self, session: Session, params: dict[str, Any],
                           command: tuple[str, str] | None) -> dict[str, Any] | Reply:
        self.running[session.id] = scope = anyio.CancelScope()
        try:
            # A cancel may come while a resource link is read through the editor, or during a
            # slash command: before run_turn has a scope of its own, this one catches it.
            with scope:
                # In the session's queue (prompts keep their order): 0.1 s of imports in a
                # worker thread, not on the event loop; the imports below are then lookups.
                await lifecycle.load_turn_modules()
                from talaria.acp_server.content import check_size, typed_text, user_content
                from talaria.acp_server.learning import finish_prompt
                from talaria.agent.loop import run_turn
                from talaria.agent.providers.errors import AuthError, ProviderError
                from talaria.agent.skills.commands import expand

                content = await user_content(params.get("prompt"), session.workspace)
                check_size(content, session.context_window)
                if command is not None:
                    return {"stopReason": await self._command(session, *command)}
                content = expand(session, typed_text(params["prompt"]), content) or content
            if scope.cancel_called:
                return {"stopReason": "cancelled"}
            try:
                reason = await run_turn(session, content)
            except ProviderError as exc:
                raise RpcError.from_provider(exc, auth=isinstance(exc, AuthError)) from None
            return await finish_prompt(self, session, reason)
        finally:
            if self.running.get(session.id) is scope:
                del self.running[session.id]

    async def cancel(self, params: dict[str, Any]) -> None:
        session = self.sessions.get(params.get("sessionId"))  # type: ignore[arg-type]
        if session is None:
            return
        if not session.cancel() and (scope := self.running.get(session.id)) is not None:
            scope.cancel()  # the prompt has not reached its turn yet
        # Neither: no prompt running, a no-op that must not poison the next turn.

    def _client_compaction(self) -> bool:
        """Whether the client advertised `session.compaction` (ACP compaction updates)."""
        return self._client_has("session", "compaction")

    def _client_has(self, group: str, name: str) -> bool:
        caps = self.client_capabilities.get(group)
        return isinstance(caps, dict) and caps.get(name) is not None

    async def _command(self, session: Session, name: str, arg: str) -> str:
        from talaria.agent import commands

        try:
            return await commands.run(session, self.config, name, arg)
        except commands.CommandError as exc:
            raise RpcError.invalid_params(str(exc)) from None

    async def _notify(self, session_id: str, update: dict[str, Any]) -> None:
        await self.peer.notify("session/update", {"sessionId": session_id, "update": update})


async def serve(reader: Any, writer: Any, config: Config, sandbox: SandboxProbe | None = None) -> None:
    peer = Peer(reader, writer, checks=ACP_CHECKS)
    server = AcpServer(peer, config, sandbox)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lifecycle.keepalive, server)
            await peer.serve()
            tg.cancel_scope.cancel()
    finally:
        server.close()


def main() -> int:
    from talaria.acp_server.logs import setup_logging
    from talaria.acp_server.stdio import protect_stdout
    from talaria.agent.config import load_config
    from talaria.agent.context import tokens
    from talaria.agent.context.token_child import TokenChild
    from talaria.tools import procs

    reader, writer = protect_stdout()
    sandbox = SandboxProbe()
    try:
        config = load_config()
        # Unless TALARIA_LOG_LEVEL asks for more, stderr gets warnings and errors only.
        explicit = config.sources.get("log_level") not in (None, "default")
        setup_logging(config.home, config.log_level if explicit else None)
    except ValueError as exc:
        print(f"talaria: {exc}")  # fd 1 is stderr now
        return 2
    procs.reap_orphans(config.home)  # what a crashed agent left running
    tokens.count_with(TokenChild().count)  # its build here would stall every request (issue 9)
    anyio.run(serve, reader, writer, config, sandbox)
    # Interpreter teardown would garbage-collect every object of the provider SDKs (~0.25 s
    # after a prompt) while the editor waits for the exit; the OS frees the memory anyway.
    gc.freeze()
    return 0
