"""`session/new`, answered before its session is built.

An editor waits on `session/new` to show its panel. The answer needs only the session's id,
its model (made here: a missing model or key is this request's error) and the values its
options open with, which come from the configuration. The session itself (the session
machinery's import, its tools, workspace, store row and system prompt: ~40 ms) is built once
the answer is out, while the editor draws the panel and the user types.

Until then a request naming that session (`sessionId`: prompt, cancel, modes, load, close,
fork...) waits for it, and `session/list` waits for every session being built, so nothing
sees a session half made. A build that fails is logged; the editor is told in the session's
own thread, and requests naming it get the error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.lowlevel

from talaria.acp_server.jsonrpc import Peer, Reply, RpcError
from talaria.acp_server.params import cwd_param, dirs_param, mcp_servers_param, quoted
from talaria.agent.config import Config
from talaria.agent.modes import editor_mode

if TYPE_CHECKING:
    from talaria.agent.options import Values
    from talaria.agent.providers.base import Provider
    from talaria.agent.session import Session
    from talaria.tools.mcp.settings import ServerSpec

log = logging.getLogger(__name__)

MAX_FAILED = 256
"""Ids of sessions whose build failed, kept to answer requests naming them."""


def state_json(values: Values, config: Config) -> dict[str, Any]:
    """ACP's `modes` and `configOptions` of a session with these values."""
    from talaria.agent.options import mode_choices

    return {
        "modes": {"currentModeId": editor_mode(values.mode),
                  "availableModes": [{"id": c.value, "name": c.name, "description": c.description}
                                     for c in mode_choices()]},
        "configOptions": options_json(values, config),
    }


def options_json(values: Values, config: Config) -> list[dict[str, Any]]:
    from talaria.agent.options import options_of

    return [
        {"id": o.id, "name": o.name, "category": o.category, "type": "select",
         "currentValue": o.current,
         "options": [{"value": c.value, "name": c.name} for c in o.choices]}
        for o in options_of(values, config)
    ]


class Builder(Protocol):
    """What builds the sessions (`sessions.AcpSessions`, which imports this module)."""

    async def open_new(self, session_id: str, cwd: Path, dirs: tuple[Path, ...],
                       servers: tuple[ServerSpec, ...], provider: Provider) -> Session: ...

    async def options_changed(self, session: Session, *, mode: bool) -> None: ...

    def announce(self, session: Session, *, plan: bool = False) -> Any: ...


class Openings:
    """The sessions answered and still being built. `sessions`: what builds them, the session
    machinery's `AcpSessions`, imported on first use; `config`: the configuration now (`logout` may
    change it)."""

    def __init__(self, peer: Peer, config: Callable[[], Config],
                 sessions: Callable[[], Builder]) -> None:
        self.peer = peer
        self._config = config
        self._sessions = sessions
        self._building: dict[str, anyio.Event] = {}
        self._failed: dict[str, str] = {}

    async def new(self, params: dict[str, Any]) -> Reply:
        from talaria.agent.ids import new_session_id
        from talaria.agent.options import opening_values
        from talaria.agent.providers.configured import make_provider
        from talaria.agent.providers.errors import ProviderError

        cwd = cwd_param(params)
        dirs = dirs_param(params, cwd)
        servers = tuple(mcp_servers_param(params))
        config = self._config()
        try:
            provider = make_provider(config)
        except ProviderError as exc:  # no model, no session (as `SessionHost.provider`)
            raise RpcError.auth_required(exc.user_message()) from None
        values = opening_values(config, provider.name, editor_mode(config.mode), len(dirs))
        session_id = new_session_id()
        self._building[session_id] = anyio.Event()
        return Reply({"sessionId": session_id, **state_json(values, config)},
                     then=partial(self._build, session_id, cwd, dirs, servers, provider, values))

    async def _build(self, session_id: str, cwd: Path, dirs: tuple[Path, ...],
                     servers: tuple[ServerSpec, ...], provider: Provider, answered: Values) -> None:
        from talaria.agent.providers.configured import warm_sdk

        async with anyio.create_task_group() as tg:
            # The model's SDK (the longest part, in a worker thread) starts loading first: its
            # file reads overlap the build. `announce` waits for the same load.
            tg.start_soon(warm_sdk, provider)
            await anyio.lowlevel.checkpoint()
            await self._build_now(session_id, cwd, dirs, servers, provider, answered)

    async def _build_now(self, session_id: str, cwd: Path, dirs: tuple[Path, ...],
                         servers: tuple[ServerSpec, ...], provider: Provider,
                         answered: Values) -> None:
        from talaria.agent.options import values

        try:
            sessions = self._sessions()
            session = await sessions.open_new(session_id, cwd, dirs, servers, provider)
        except Exception as exc:
            cause = exc.message if isinstance(exc, RpcError) else f"{type(exc).__name__}: {exc}"
            log.error("session %s could not be opened: %s", session_id, cause,
                      exc_info=not isinstance(exc, RpcError))
            self._fail(session_id, cause)
            self._built(session_id)
            await self._tell(session_id, f"Talaria could not open this session: {cause}")
            return
        except BaseException:
            self._built(session_id)
            raise
        try:  # before any request waiting for it runs
            if (now := values(session)) != answered:  # e.g. an environment fell back to local
                await sessions.options_changed(session, mode=now.mode != answered.mode)
        finally:
            self._built(session_id)
        await sessions.announce(session)()

    def _built(self, session_id: str) -> None:
        self._building.pop(session_id).set()

    def _fail(self, session_id: str, cause: str) -> None:
        self._failed[session_id] = cause
        while len(self._failed) > MAX_FAILED:
            del self._failed[next(iter(self._failed))]

    async def _tell(self, session_id: str, text: str) -> None:
        try:
            await self.peer.notify("session/update", {"sessionId": session_id, "update": {
                "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}})
        except Exception as exc:  # the editor is gone: the log has it
            log.info("could not tell the editor: %s", exc)

    async def ready(self, method: str, params: Any) -> None:
        """Wait for the session `params` names, if it is being built (for `session/list`:
        every one); RpcError for one whose build failed."""
        if method == "session/list":
            while self._building:
                await next(iter(self._building.values())).wait()
            return
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        if not isinstance(session_id, str):
            return
        if (event := self._building.get(session_id)) is not None:
            await event.wait()
        if (cause := self._failed.get(session_id)) is not None and method != "session/delete":
            raise RpcError.resource_not_found(
                f"session {quoted(session_id)} could not be opened: {cause}", sessionId=session_id)
