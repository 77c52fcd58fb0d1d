"""Session lifecycle beside `server.py`: the newer methods (`session/fork`, unstable;
`session/delete`; `logout`), what follows a session's opening (`announce`: commands, plan),
and the keepalive of running prompts. `server.py` registers and calls them.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from talaria.acp_server.jsonrpc import ConnectionClosed, Peer, Reply, RpcError
from talaria.acp_server.params import cwd_param, param, quoted

log = logging.getLogger(__name__)

TURN_MODULES = ("talaria.agent.loop", "talaria.acp_server.content", "talaria.agent.skills.review")
"""What a prompt imports that `session/new` does not: 0.1 s of module code, imported in a worker
thread (`load_turn_modules`) so that a first prompt does not run it on the event loop."""
_turn_modules_loaded = False

if TYPE_CHECKING:
    from talaria.agent.config import Config
    from talaria.agent.session import Session
    from talaria.agent.store import Store


class AcpServer(Protocol):
    """What these functions use of `server.AcpServer` (named here: server.py imports us)."""

    peer: Peer
    config: Config
    sessions: dict[str, Session]
    running: dict[str, anyio.CancelScope]
    sent_commands: dict[str, dict[str, Any]]

    @property
    def store(self) -> Store: ...

    def _build(self, cwd: Path, *, model: str | None, mode: str | None = None,
               session_id: str | None = None, history: list[Any] | None = None) -> Session: ...

    def _state(self, session: Session) -> dict[str, Any]: ...

    async def _notify(self, session_id: str, update: dict[str, Any]) -> None: ...

    async def close_session(self, params: dict[str, Any]) -> dict[str, Any]: ...


async def fork_session(server: AcpServer, params: dict[str, Any]) -> Reply:
    """Unstable `session/fork`: a new session with the transcript up to now (what a running
    turn has committed so far); the source goes on untouched."""
    source_id = param(params, "sessionId")
    cwd = cwd_param(params)
    source = server.sessions.get(source_id)
    record = server.store.get_session(source_id)
    if record is None:
        raise RpcError.resource_not_found(f"no session {quoted(source_id)} was saved",
                                          sessionId=source_id)
    from talaria.agent.runtime import new_session_id

    fork_id = new_session_id()
    store = server.store
    # Copying and parsing a long transcript: megabytes of JSON, in a worker thread (issue 9).
    await anyio.to_thread.run_sync(store.copy_session, source_id, fork_id)
    history = await anyio.to_thread.run_sync(lambda: store.messages(fork_id, include_archived=False))
    session = server._build(cwd, model=source.provider.name if source else None,
                          mode=source.permissions.mode if source else None,
                          session_id=fork_id, history=history)
    session.title = f"{record.title or 'Untitled'} (fork)"[:80]
    server.store.update_session(fork_id, title=session.title)
    if source is not None:
        session.tool_state.todos = [dict(t) for t in source.tool_state.todos]
    else:
        from talaria.acp_server.history import last_todos

        session.tool_state.todos = last_todos(history) or []
    return Reply({"sessionId": fork_id, **server._state(session)},
                 then=announce(server, session, plan=True))

async def delete_session(server: AcpServer, params: dict[str, Any]) -> dict[str, Any]:
    """`session/delete`: close it if open, then remove its transcript from the store."""
    session_id = param(params, "sessionId")
    if session_id in server.sessions:
        await server.close_session(params)
    if not server.store.delete_session(session_id):
        raise RpcError.resource_not_found(f"no session {quoted(session_id)} was saved",
                                          sessionId=session_id)
    return {}

async def logout(server: AcpServer, params: dict[str, Any]) -> dict[str, Any]:
    """Forget the keys `talaria setup` stored; new sessions then need credentials again
    (keys in the environment stay: they are not ours to remove). Open sessions go on."""
    import dataclasses

    try:
        (server.config.home / "credentials").unlink(missing_ok=True)
    except OSError as exc:
        raise RpcError.internal(f"could not remove the stored credentials: {exc.strerror}") \
            from None
    server.config = dataclasses.replace(server.config, credentials={})
    return {}


def announce(server: AcpServer, session: Session, *, plan: bool = False) -> Any:
    """`available_commands_update`, sent right after the new/load/resume response; with
    `plan`, the todo list's plan too (a forked session replays nothing)."""
    from talaria.acp_server.learning import send_commands
    from talaria.acp_server.updates import plan_entries
    from talaria.tools.todo import plan_entries as todo_plan

    async def send() -> None:
        await send_commands(server, session, force=True)  # built-in commands and skills
        if plan and session.tool_state.todos:
            entries = plan_entries(todo_plan(session.tool_state.todos))
            await server._notify(session.id, {"sessionUpdate": "plan", "entries": entries})
        try:  # the model's SDK loads now, in a worker thread, so the first prompt does not wait
            await session.provider.warm()
        except Exception as exc:  # the first prompt reports it, with its cause
            log.info("could not load the model's SDK ahead of the first prompt: %s", exc)
        await load_turn_modules()

    return send


async def load_turn_modules() -> None:
    """Import `TURN_MODULES` in a worker thread, once per process. Not on the event loop: 0.1 s
    there held up every other request; and a module another thread is still importing would
    block the loop on its import lock, which is why a first prompt waits here, in the loop's
    terms, rather than importing them itself."""
    global _turn_modules_loaded
    if not _turn_modules_loaded:
        await anyio.to_thread.run_sync(lambda: [importlib.import_module(m) for m in TURN_MODULES])
        _turn_modules_loaded = True


def environment(config: Config, base: Any, session_id: str) -> Any:
    """The configured execution environment around `base` (started at its first tool call);
    a table that does not check out leaves the session on local, with a warning."""
    from talaria.agent.runtime import environment_workspace
    from talaria.tools.errors import EnvError

    try:
        return environment_workspace(config, base, session_id)
    except EnvError as exc:
        log.warning("%s; this session runs on local", exc)
        return environment_workspace(config, base, session_id, "local")


async def queued(session: Session, ahead: int) -> None:
    """The notice a prompt gets when it waits for the running turn."""
    from talaria.agent.events import Notice

    await session.door.emit(Notice(
        f"Queued: this prompt runs after the current turn ({ahead} ahead of it). "
        "/queue lists waiting prompts, /queue clear drops them, /steer talks to the running turn."))


async def keepalive(server: AcpServer) -> None:
    """Editor panels with idle timeouts drop a turn that stays silent too long (VS Code
    ACP clients): a running prompt silent for `keepalive_s` gets an empty text chunk."""
    interval = server.config.keepalive_s
    if not interval:
        return
    while True:
        await anyio.sleep(max(interval / 10, 0.05))
        for session_id in list(server.running):
            session = server.sessions.get(session_id)
            door = getattr(session, "door", None)
            if door is not None and door.silent_for() >= interval:
                try:
                    await door.notify({"sessionUpdate": "agent_message_chunk",
                                       "content": {"type": "text", "text": ""}})
                except ConnectionClosed:  # the editor is gone: nobody left to keep alive
                    return
