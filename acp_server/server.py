"""`talaria acp`: the Agent Client Protocol v1 agent on stdio.

Maps protocol methods onto the agent layer; owns no agent logic. Start-up stays light
(no provider SDK import before the first prompt) because editors wait on `initialize`.
"""

from __future__ import annotations

import gc
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio

from talaria.acp_server import commands
from talaria.acp_server.content import check_size, count_off_loop, typed_text, user_content
from talaria.acp_server.history import last_todos, replay_updates
from talaria.acp_server.jsonrpc import MODEL_ERROR, Peer, PeerError, Reply, RpcError
from talaria.acp_server.params import cwd_param, param, parse_cursor, quoted
from talaria.acp_server.sandbox_probe import SandboxProbe
from talaria.acp_server.updates import compaction, iso, to_update
from talaria.agent.config import Config
from talaria.agent.events import Compacted
from talaria.agent.permissions import MODES, PermissionAsk
from talaria.agent.session import Session
from talaria.agent.store import Store

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
VERSION = "0.1.0"
LIST_PAGE = 50
AUTH_METHOD = "setup"
MODE_NAMES = {
    "default": ("Default", "Ask before edits and commands"),
    "accept_edits": ("Accept edits", "Edit project files without asking; commands ask"),
    "plan": ("Plan", "Read-only: no edits, no commands"),
    "dont_ask": ("Don't ask", "No prompts, except for sensitive paths"),
}
EXEC_MODES = {"project": "the project (its own Python)", "strict": "a staging dir (Talaria's Python)"}
EFFORTS = ("default", "low", "medium", "high")
PERMISSION_OPTIONS = [
    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject_always", "name": "Always reject", "kind": "reject_always"},
]


class AcpServer:
    def __init__(self, peer: Peer, config: Config, sandbox: SandboxProbe | None = None) -> None:
        self.peer = peer
        self.config = config
        self.sandbox = sandbox or SandboxProbe()
        self.client_capabilities: dict[str, Any] = {}
        self.sessions: dict[str, Session] = {}
        self.running: dict[str, anyio.CancelScope] = {}
        """Session id -> the scope of its running `session/prompt` (see `cancel`)."""
        self._store: Store | None = None
        self._kernels: Any = None
        """execute_code kernels of all sessions: one pool, so at most MAX_KERNELS live."""
        for method, handler in {
            "initialize": self.initialize, "authenticate": self.authenticate,
            "session/new": self.new_session, "session/load": self.load_session,
            "session/resume": self.resume_session, "session/list": self.list_sessions,
            "session/close": self.close_session, "session/prompt": self.prompt,
            "session/set_mode": self.set_mode, "session/set_config_option": self.set_config_option,
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
                "mcpCapabilities": {"http": False, "sse": False},
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}},
            },
            "agentInfo": {"name": "talaria", "title": "Talaria", "version": VERSION},
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

    def _switch_model(self, model: str) -> Any:
        """The provider for a model the user picked: a bad name is bad params, not auth."""
        from talaria.agent.providers.errors import AuthError, BillingError, ProviderError
        from talaria.agent.runtime import make_provider

        name = model.partition(":")[2] if ":" in model else model
        if not name.strip() or model.startswith(":"):
            raise RpcError.invalid_params(f"model {model!r} must look like provider:model")
        try:
            return make_provider(self.config, model)
        except (AuthError, BillingError) as exc:
            raise RpcError.auth_required(exc.user_message()) from None
        except ProviderError as exc:
            raise RpcError.invalid_params(exc.user_message()) from None

    def _session(self, params: dict[str, Any]) -> Session:
        session_id = param(params, "sessionId")
        session = self.sessions.get(session_id)
        if session is None:
            raise RpcError.resource_not_found(f"no session {quoted(session_id)} is open",
                                              sessionId=session_id)
        return session

    def _build(self, cwd: Path, *, model: str | None, mode: str | None = None,
               session_id: str | None = None, history: list[Any] | None = None) -> Session:
        from talaria.acp_server.editor_workspace import EditorWorkspace
        from talaria.agent.runtime import new_session
        from talaria.tools.local.workspace import LocalWorkspace

        provider = self._provider(model)
        if mode is None:  # `bypass` (TALARIA_MODE) is for headless runs: editors ask
            mode = self.config.mode if self.config.mode in MODES else "default"
        holder: dict[str, str] = {}
        workspace = EditorWorkspace(self.peer, "", self.client_capabilities, LocalWorkspace(cwd))
        session = new_session(
            self.config, cwd=cwd, workspace=workspace, provider=provider, store=self.store,
            asker=lambda ask: self._ask(holder["id"], ask), mode=mode, session_id=session_id,
            history=history,
        )
        holder["id"] = workspace.session_id = session.id
        if self._kernels is None:
            from talaria.tools.execute_code.pool import KernelPool

            self._kernels = KernelPool()
        session.state["kernels"] = self._kernels.session(session.id)
        self.sessions[session.id] = session
        return session

    async def new_session(self, params: dict[str, Any]) -> dict[str, Any]:
        cwd = cwd_param(params)
        session = self._build(cwd, model=None)
        return Reply({"sessionId": session.id, **self._state(session)}, then=self._commands(session))

    async def load_session(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self._restore(params)
        tools = {t.name: t for t in session.tools}
        compactions = self._client_compaction()
        for update in replay_updates(session.store.messages(session.id), tools,
                                     compaction_updates=compactions):
            await self._notify(session.id, update)
        return Reply(self._state(session), then=self._commands(session))

    async def resume_session(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self._restore(params)
        return Reply(self._state(session), then=self._commands(session))

    def _restore(self, params: dict[str, Any]) -> Session:
        session_id = param(params, "sessionId")
        cwd = cwd_param(params)
        if session_id in self.sessions:
            return self.sessions[session_id]
        record = self.store.get_session(session_id)
        if record is None:
            raise RpcError.resource_not_found(f"no session {quoted(session_id)} was saved",
                                              sessionId=session_id)
        history = self.store.messages(session_id, include_archived=False)
        session = self._build(cwd, model=record.model if ":" in (record.model or "") else None,
                              mode=record.mode if record.mode in MODES else None,
                              session_id=session_id, history=history)
        session.title = record.title
        if (todos := last_todos(history)) is not None:
            session.state["todos"] = todos  # the plan survives a restart
        return session

    async def list_sessions(self, params: dict[str, Any]) -> dict[str, Any]:
        cwd = params.get("cwd")
        cursor = params.get("cursor")
        if cwd is not None and not isinstance(cwd, str) or cursor is not None and not isinstance(cursor, str):
            raise RpcError.invalid_params("`cwd` and `cursor` must be strings")
        before = parse_cursor(cursor) if cursor else None
        records = self.store.list_sessions(cwd=cwd, before=before, limit=LIST_PAGE + 1)
        page = records[:LIST_PAGE]
        result: dict[str, Any] = {"sessions": [
            {"sessionId": r.id, "cwd": r.cwd, "title": r.title, "updatedAt": iso(r.updated_at)}
            for r in page
        ]}
        if len(records) > LIST_PAGE:
            result["nextCursor"] = f"{page[-1].updated_at!r}/{page[-1].id}"
        return result

    async def close_session(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self._session(params)
        await self.cancel({"sessionId": session.id})
        session.close()  # stops its execute_code kernel
        self.sessions.pop(session.id, None)
        return {}

    # -- modes and config options ---------------------------------------------------------

    def _state(self, session: Session) -> dict[str, Any]:
        mode = session.permissions.mode if session.permissions.mode in MODES else "default"
        return {
            "modes": {"currentModeId": mode, "availableModes": [
                {"id": m, "name": MODE_NAMES[m][0], "description": MODE_NAMES[m][1]} for m in MODES
            ]},
            "configOptions": self._config_options(session),
        }

    def _config_options(self, session: Session) -> list[dict[str, Any]]:
        models = dict.fromkeys([session.provider.name, *(self.config.model or "").split()[:1],
                                *self.config.fallback_models])
        effort = session.state.get("reasoning_effort") or "default"
        return [
            {"id": "mode", "name": "Mode", "category": "mode", "type": "select",
             "currentValue": session.permissions.mode,
             "options": [{"value": m, "name": MODE_NAMES[m][0]} for m in MODES]},
            {"id": "model", "name": "Model", "category": "model", "type": "select",
             "currentValue": session.provider.name,
             "options": [{"value": m, "name": m} for m in models if m]},
            {"id": "reasoning_effort", "name": "Reasoning effort", "category": "thought_level",
             "type": "select", "currentValue": effort,
             "options": [{"value": e, "name": e.capitalize()} for e in EFFORTS]},
            {"id": "exec_mode", "name": "execute_code runs in", "category": "_talaria_exec",
             "type": "select", "currentValue": self._exec_settings(session).mode,
             "options": [{"value": m, "name": EXEC_MODES[m]} for m in EXEC_MODES]},
        ]

    def _exec_settings(self, session: Session) -> Any:
        from talaria.tools.execute_code.env import ExecSettings

        return session.state.get("exec_settings") or ExecSettings()

    async def set_mode(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self._session(params)
        await self.apply_option(session, "mode", param(params, "modeId"))
        return {}

    async def set_config_option(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self._session(params)
        await self.apply_option(session, param(params, "configId"), params.get("value"))
        return {"configOptions": self._config_options(session)}

    async def apply_option(self, session: Session, option: str, value: Any) -> None:
        """Change mode, model or reasoning effort, keeping modes and options in sync."""
        if not isinstance(value, str):
            raise RpcError.invalid_params("`value` must be a string")
        if option == "mode":
            if value not in MODES:
                raise RpcError.invalid_params(f"unknown mode {value!r}; modes: {', '.join(MODES)}")
            session.permissions.mode = value
            session.store.update_session(session.id, mode=value)
            await self._notify(session.id, {"sessionUpdate": "current_mode_update", "currentModeId": value})
        elif option == "model":
            session.provider = self._switch_model(value)
            session.context_window = self.config.window_for(value)
            session.supports_images = self.config.supports_images(value)
            session.store.update_session(session.id, model=value)
        elif option == "reasoning_effort":
            if value not in EFFORTS:
                raise RpcError.invalid_params(f"unknown effort {value!r}; choose from {', '.join(EFFORTS)}")
            session.state["reasoning_effort"] = None if value == "default" else value
        elif option == "exec_mode":
            if value not in EXEC_MODES:
                raise RpcError.invalid_params(f"unknown exec mode {value!r}; choose project or strict")
            # The session's kernel restarts on its next call: its settings changed.
            session.state["exec_settings"] = replace(self._exec_settings(session), mode=value)
        else:
            raise RpcError.invalid_params(f"unknown config option {option!r}")
        await self._notify(session.id, {"sessionUpdate": "config_option_update",
                                        "configOptions": self._config_options(session)})

    # -- prompts ----------------------------------------------------------------------------

    async def prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        from talaria.agent.loop import run_turn
        from talaria.agent.providers.errors import ProviderError

        session = self._session(params)
        if session.id in self.running:
            raise RpcError.invalid_params("a prompt is already running in this session")
        self.running[session.id] = scope = anyio.CancelScope()
        try:
            # A cancel may come while a resource link is read through the editor, or during a
            # slash command: before run_turn has a scope of its own, this one catches it.
            with scope:
                content = await user_content(params.get("prompt"), session.workspace)
                check_size(content, session.context_window)
                await count_off_loop(content)
                command = commands.parse(typed_text(params["prompt"]))
                if command is not None:
                    return {"stopReason": await commands.run(self, session, *command)}
            if scope.cancel_called:
                return {"stopReason": "cancelled"}
            try:
                reason = await run_turn(session, content, lambda e: self._emit(session.id, e))
            except ProviderError as exc:
                raise model_error(exc) from None
            return {"stopReason": reason}
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

    async def _ask(self, session_id: str, ask: PermissionAsk) -> str:
        tool_call: dict[str, Any] = {"toolCallId": ask.tool_call_id, "title": ask.title, "kind": ask.kind}
        if ask.reason not in ("edit", "command"):
            tool_call["content"] = [{"type": "content", "content": {"type": "text", "text": f"Asking because: {ask.reason}"}}]
        try:
            result = await self.peer.request(
                "session/request_permission",
                {"sessionId": session_id, "toolCall": tool_call, "options": PERMISSION_OPTIONS},
                timeout=None,
            )
        except RpcError as exc:  # a client that cannot ask: nothing was allowed
            log.warning("session/request_permission failed: %s", exc)
            return "reject_once"
        except PeerError:  # the editor is gone: nobody can answer, stop the turn
            if (session := self.sessions.get(session_id)) is not None:
                session.cancel()
            return "cancelled"
        outcome = result.get("outcome") if isinstance(result, dict) else None
        if not isinstance(outcome, dict) or outcome.get("outcome") != "selected":
            return "cancelled"
        chosen = outcome.get("optionId")
        return chosen if chosen in {o["optionId"] for o in PERMISSION_OPTIONS} else "reject_once"

    def _client_compaction(self) -> bool:
        """Whether the client advertised `session.compaction` (ACP compaction updates)."""
        session_caps = self.client_capabilities.get("session")
        return isinstance(session_caps, dict) and session_caps.get("compaction") is not None

    async def _emit(self, session_id: str, event: Any) -> None:
        if isinstance(event, Compacted):
            await self._notify(session_id, compaction(event, client_supports=self._client_compaction()))
            return
        update = to_update(event)
        if update is not None:
            await self._notify(session_id, update)

    async def _notify(self, session_id: str, update: dict[str, Any]) -> None:
        await self.peer.notify("session/update", {"sessionId": session_id, "update": update})

    def _commands(self, session: Session) -> Any:
        """`available_commands_update`, sent right after the new/load/resume response."""
        return lambda: self._notify(session.id, commands.available_update())


def model_error(exc: Any) -> RpcError:
    """A failed model call (a ProviderError) as the answer to `session/prompt`: -32000 when the
    key was refused (clients then offer their sign-in, which runs `talaria setup`), -32050 for
    every other cause; the message names the endpoint and what to do, `data` classifies it."""
    from talaria.agent.providers.errors import AuthError

    code = -32000 if isinstance(exc, AuthError) else MODEL_ERROR
    return RpcError(code, exc.user_message(), exc.to_data())


async def serve(reader: Any, writer: Any, config: Config, sandbox: SandboxProbe | None = None) -> None:
    peer = Peer(reader, writer)
    server = AcpServer(peer, config, sandbox)
    try:
        await peer.serve()
    finally:
        server.close()


def main() -> int:
    from talaria.acp_server.logs import setup_logging
    from talaria.acp_server.stdio import protect_stdout
    from talaria.agent.config import load_config

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
    anyio.run(serve, reader, writer, config, sandbox)
    # Interpreter teardown would garbage-collect every object of the provider SDKs (~0.25 s
    # after a prompt) while the editor waits for the exit; the OS frees the memory anyway.
    gc.freeze()
    return 0
