"""`talaria acp`: the Agent Client Protocol v1 agent on stdio.

Maps protocol methods onto the agent layer; owns no agent logic. Start-up stays light
(no provider SDK import before the first prompt) because editors wait on `initialize`.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from talaria.acp_server.jsonrpc import Peer, RpcError
from talaria.acp_server.opening import Openings
from talaria.acp_server.params import ACP_CHECKS, ClientInfo, param
from talaria.acp_server.sandbox_probe import RECHECK_AFTER_S, SandboxProbe
from talaria.acp_server.version import version
from talaria.agent import gcpause
from talaria.agent.config import Config

if TYPE_CHECKING:
    from talaria.agent.host import SessionHost

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
AUTH_METHOD = "setup"
"""The terminal method: the client runs `talaria setup` (only for clients that say they can)."""
ENV_METHOD = "environment"
"""The agent method every client can use: `authenticate` checks the configured model."""


SESSION_METHODS = {
    "session/load": ("sessions", "load"),
    "session/resume": ("sessions", "resume"), "session/fork": ("sessions", "fork"),
    "session/list": ("sessions", "list_sessions"), "session/close": ("sessions", "close"),
    "session/delete": ("sessions", "delete"), "session/set_mode": ("sessions", "set_mode"),
    "session/set_config_option": ("sessions", "set_config_option"),
    "session/prompt": ("turns", "prompt"),
}
"""Request -> (part, method) of the session machinery (`Parts`) that answers it; `session/new`
is answered before that (`opening.Openings`)."""


class Parts:
    """The session machinery: one `SessionHost` with the ACP sessions and turns over it."""

    def __init__(self, peer: Peer, config: Config, client: ClientInfo) -> None:
        from talaria.acp_server.learning import CommandsUpdates
        from talaria.acp_server.sessions import AcpDoors, AcpSessions
        from talaria.acp_server.turns import TURN_MODULES, AcpTurns
        from talaria.agent.host import SessionHost

        doors = AcpDoors(peer, client)
        self.host = doors.host = SessionHost(config, doors, editor=True, warm_after_answer=True,
                                             turn_modules=TURN_MODULES)
        commands = CommandsUpdates(peer, self.host)
        self.sessions = AcpSessions(self.host, peer, client, commands)
        doors.config_options = self.sessions.config_options
        self.turns = AcpTurns(self.host, self.sessions, commands)


class AcpServer:
    """The ACP methods, registered on the peer: `initialize`, `authenticate` and `logout`
    here; sessions (`sessions.AcpSessions`) and prompts (`turns.AcpTurns`) over one
    `SessionHost`, in `Parts`.

    `initialize` and `session/new` are answered before `Parts` is imported (~35 ms of
    modules): they are loaded once `session/new`'s answer is out, to build its session, or by
    the first method that needs them."""

    def __init__(self, peer: Peer, config: Config, sandbox: SandboxProbe | None = None,
                 gc_paused: bool = False) -> None:
        """`gc_paused`: the collector was paused for start-up's imports (`talaria acp`); it
        resumes once `Parts` is built."""
        self.peer = peer
        self.sandbox = sandbox or SandboxProbe()
        self.client = ClientInfo()
        self._config = config
        self._parts: Parts | None = None
        self._gc_paused = gc_paused
        self.ready = anyio.Event()
        """Set once `Parts` is built."""
        for method, handler in {
            "initialize": self.initialize, "authenticate": self.authenticate, "logout": self.logout,
        }.items():
            peer.on_request(method, handler)
        self.openings = Openings(peer, lambda: self.config, lambda: self.parts.sessions)
        peer.on_request("session/new", self.openings.new)
        for method, (part, name) in SESSION_METHODS.items():
            peer.on_request(method, self._handler(method, part, name))
        peer.on_notification("session/cancel", self._handler("session/cancel", "turns", "cancel"))

    def _handler(self, method: str, part: str,
                 name: str) -> Callable[[dict[str, Any]], Awaitable[Any]]:
        async def handle(params: dict[str, Any]) -> Any:
            await self.openings.ready(method, params)  # its session, if still being built
            return await getattr(getattr(self.parts, part), name)(params)

        return handle

    @property
    def parts(self) -> Parts:
        """The session machinery, imported and built on first use."""
        if self._parts is None:
            self._parts = Parts(self.peer, self._config, self.client)
            self.ready.set()
            if self._gc_paused:  # start-up's imports are done
                self._gc_paused = False
                gcpause.resume()
        return self._parts

    @property
    def host(self) -> SessionHost:
        return self.parts.host

    @property
    def config(self) -> Config:
        return self._parts.host.config if self._parts is not None else self._config

    def close(self) -> None:
        if self._parts is not None:
            self._parts.host.close_all()

    async def keepalive(self) -> None:
        """The turns' keepalive (`AcpTurns.keepalive`), once there are turns."""
        await self.ready.wait()
        await self.parts.turns.keepalive(self.config.keepalive_s)

    async def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        param(params, "protocolVersion", int)
        caps = params.get("clientCapabilities")
        caps = caps if isinstance(caps, dict) else {}
        if not isinstance(caps.get("fs"), dict):  # `"fs": true` must not crash session/new later
            caps = {**caps, "fs": {}}
        self.client.capabilities = caps
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": True, "sse": True},
                # `fork` is unstable in ACP v1: clients that do not know it ignore it.
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {},
                                        "additionalDirectories": {}, "fork": {}},
                "auth": {"logout": {}},
            },
            "agentInfo": {"name": "talaria", "title": "Talaria", "version": version()},
            "_meta": {"talaria": {"sandbox": await self.sandbox.tier()}},
            "authMethods": self._auth_methods(caps),
        }

    def _auth_methods(self, caps: dict[str, Any]) -> list[dict[str, Any]]:
        """A `terminal` method only for a client that sets `auth.terminal` (the schema says
        MUST); an `agent` method for every client, saying where the model and key come from."""
        methods: list[dict[str, Any]] = []
        auth = caps.get("auth")
        if isinstance(auth, dict) and auth.get("terminal") is True:
            methods.append({
                "id": AUTH_METHOD, "name": "Configure a model",
                "description": "Choose a provider and enter its API key (runs `talaria setup`).",
                "type": "terminal", "args": ["setup"]})
        methods.append({
            "id": ENV_METHOD, "name": "Use the configured model",
            "description": "Talaria reads its model and key from the environment the editor "
                           "starts it with (TALARIA_MODEL, e.g. openai:gpt-4.1, and "
                           "OPENAI_API_KEY or ANTHROPIC_API_KEY) or from what `talaria setup`, "
                           "run once in a terminal, stored."})
        return methods

    async def authenticate(self, params: dict[str, Any]) -> dict[str, Any]:
        from talaria.agent.host import ModelFailure

        method = param(params, "methodId")
        # `setup` too: clients without terminal auth have sent it (the schema forbids it, but
        # checking the configuration is the honest answer either way).
        if method not in (ENV_METHOD, AUTH_METHOD):
            raise RpcError.invalid_params(f"unknown auth method {method!r}; use {ENV_METHOD!r}")
        try:
            self.host.provider()  # fails with how-to when nothing is configured
        except ModelFailure as exc:
            raise RpcError.from_model(exc) from None
        return {}

    async def logout(self, params: dict[str, Any]) -> dict[str, Any]:
        """Forget the keys `talaria setup` stored; new sessions then need credentials again
        (keys in the environment stay: they are not ours to remove). Open sessions go on."""
        import dataclasses

        try:
            (self.config.home / "credentials").unlink(missing_ok=True)
        except OSError as exc:
            raise RpcError.internal(f"could not remove the stored credentials: {exc.strerror}") \
                from None
        self.host.config = dataclasses.replace(self.config, credentials={})
        return {}


async def serve(reader: Any, writer: Any, config: Config, sandbox: SandboxProbe | None = None,
                gc_paused: bool = False) -> None:
    peer = Peer(reader, writer, checks=ACP_CHECKS)
    server = AcpServer(peer, config, sandbox, gc_paused)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.keepalive)
            await peer.serve()
            tg.cancel_scope.cancel()
    finally:
        server.close()


def main(gc_paused: bool = False) -> int:
    """`gc_paused`: the caller paused the collector for start-up (`talaria.agent.gcpause`);
    it resumes once the session machinery is imported."""
    from talaria.acp_server.logs import setup_logging
    from talaria.acp_server.stdio import protect_stdout
    from talaria.agent.config import load_config
    from talaria.agent.context import tokens
    from talaria.agent.context.token_child import TokenChild
    from talaria.tools import procs

    reader, writer = protect_stdout()
    sandbox = SandboxProbe(recheck_after=RECHECK_AFTER_S)
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
    anyio.run(serve, reader, writer, config, sandbox, gc_paused)
    # Interpreter teardown would garbage-collect every object of the provider SDKs (~0.25 s
    # after a prompt) while the editor waits for the exit; the OS frees the memory anyway.
    gc.freeze()
    return 0
