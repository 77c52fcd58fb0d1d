"""The session host: what every front door does with sessions, written once.

A front door (the ACP server, the LSP door, `talaria run`, a batch worker) keeps only protocol
translation: params in, events out, the host's errors into its own form. The host owns the
store and the execute_code kernel pool its sessions share, the table of open sessions, and a
session's whole life:

    host = SessionHost(config, doors, editor=True)
    session = await host.open(cwd, mcp_servers=servers)   # or restore / fork
    outcome = await host.prompt(session, text)             # queued behind a running turn
    ...answer with outcome.stop_reason; once the answer is out:
    if outcome.after: await outcome.after()                # the background review
    host.cancel(session.id); await host.close(session.id); await host.delete(session.id)

Errors a door translates: `ModelFailure` (no model could be made, or a model call failed:
`setup`, `auth`, a one-line `message`, `data` for programs), `NoSuchSession`, `RootsInUse`
(other additional directories for a session whose turn runs), and `commands.CommandError` (a
slash command's bad argument). An environment that cannot start is
an `EnvError` for headless doors; editors' sessions fall back to local with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel

from talaria.agent.config import Config
from talaria.agent.host.parts import (
    Content,
    Doors,
    ModelFailure,
    NoSuchSession,
    Outcome,
    RootsInUse,
    closer,
    count_ahead,
    import_once,
    loaded,
    queued,
    stored_model,
)
from talaria.agent.prompt import roots_note
from talaria.agent.providers.base import Provider
from talaria.agent.runtime import (
    Opening,
    dirs_meta,
    environment_workspace,
    last_todos,
    make_provider,
    new_session,
    new_session_id,
    open_store,
    prestart,
    stored_dirs,
    tools_ready,
)
from talaria.agent.session import Session
from talaria.tools.builtin import DEFAULT_TOOLS
from talaria.tools.workspace import Workspace

if TYPE_CHECKING:
    from talaria.agent.store import Store
    from talaria.tools.execute_code.pool import KernelPool
    from talaria.tools.mcp.settings import ServerSpec

log = logging.getLogger(__name__)

FIRST_REQUEST_WAIT_S = 5.0
"""How long a turn's first model request waits for the session's MCP servers still starting
(a session opens without waiting for them); one that comes up later has its tools in the next."""
TURN_MODULES = ("talaria.agent.loop", "talaria.agent.skills.review", "talaria.agent.subagents")
"""What a prompt imports that opening a session does not (~0.1 s): `load_turn_modules`."""

class SessionHost:
    """The sessions of one front door. `editor`: an editor's door (sessions ask the user, a
    bad environment falls back to local, headless `bypass` is not honoured, tools arrive in
    the background); else headless (`talaria run`, batch: the environment and MCP servers are
    up before the first model call, or `open` fails). `review`: run the background review
    after turns (batch opts out: a review's model calls and skill writes would leak into
    measured, parallel tasks). `prestart`: warm a new session's kernel and checkpoints; with
    `warm_after_answer`, not while it opens but in `warm`, which the door calls once its answer
    is out (spawning the kernel held `session/new`'s answer up by 25-70 ms)."""

    def __init__(self, config: Config, doors: Doors, *, editor: bool, review: bool = True,
                 prestart: bool = True, warm_after_answer: bool = False,
                 turn_modules: tuple[str, ...] = ()) -> None:
        self.config = config
        self.doors = doors
        self.editor = editor
        self.review = review
        self.prestart = prestart
        self.warm_after_answer = warm_after_answer
        self.turn_modules = (*TURN_MODULES, *turn_modules)
        self.sessions: dict[str, Session] = {}
        self.running: dict[str, anyio.CancelScope] = {}
        """Session id -> the scope of its prompt in progress (admitted, maybe not yet in its
        turn: `cancel` stops it there too)."""
        self._store: Store | None = None
        self._kernels: KernelPool | None = None

    @property
    def store(self) -> Store:
        """Opened on first use: a door's start stays instant."""
        if self._store is None:
            self._store = open_store(self.config)
        return self._store

    @property
    def kernels(self) -> KernelPool:
        """execute_code kernels of all sessions: one pool, so at most MAX_KERNELS live."""
        if self._kernels is None:
            from talaria.tools.execute_code.pool import KernelPool

            self._kernels = KernelPool()
        return self._kernels

    def provider(self, model: str | None = None, config: Config | None = None) -> Provider:
        """The configured model (or `model`); ModelFailure(setup=True) when none can be made."""
        from talaria.agent.providers.errors import ProviderError

        try:
            return make_provider(config or self.config, model)
        except ProviderError as exc:
            raise ModelFailure.of(exc, setup=True) from None

    def get(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise NoSuchSession(session_id, saved=False)
        return session

    def close_all(self) -> None:
        for session in list(self.sessions.values()):
            session.close()
        self.sessions.clear()
        if self._store is not None:
            self._store.close()
            self._store = None

    @property
    def _at_opening(self) -> bool:
        return self.prestart and not self.warm_after_answer

    async def warm(self, session: Session) -> None:
        """What the first prompt would otherwise wait for, once the door's answer to an opening
        is out: the model's SDK (in a worker thread, started first: the longest, 0.4-0.6 s),
        the kernel and checkpoints (`warm_after_answer`), the turn's modules, the token count."""
        from talaria.agent.providers.configured import warm_sdk

        async with anyio.create_task_group() as tg:
            tg.start_soon(warm_sdk, session.provider)
            await anyio.lowlevel.checkpoint()  # its thread starts before the kernel's fork
            if self.prestart and self.warm_after_answer and self.sessions.get(session.id) is session:
                prestart(session)
            tg.start_soon(self.load_turn_modules)
            tg.start_soon(count_ahead, session, session.context_window * session.compact_threshold)

    async def open(self, cwd: Path, *, model: str | None = None, mode: str | None = None,
                   mcp_servers: tuple[ServerSpec, ...] = (), environment: str | None = None,
                   tool_names: tuple[str, ...] = DEFAULT_TOOLS, session_id: str | None = None,
                   provider: Provider | None = None, config: Config | None = None,
                   additional_dirs: tuple[Path, ...] = ()) -> Session:
        """A new session. `environment`: NAME[:ARG] instead of the configured one; `provider`:
        one the door already has (a batch worker keeps its SDK clients); `config`: settings of
        this session alone (a batch task's model and limits), same home; `additional_dirs`:
        more roots of its project (`tools.paths.additional_dirs` checked them)."""
        opening = Opening(cwd, additional_dirs, session_id=session_id or new_session_id(),
                          mode=mode, tool_names=tool_names, mcp_servers=mcp_servers,
                          prestart=self._at_opening)
        return await self._open(opening, model=model, environment=environment,
                                provider=provider, config=config)

    async def restore(self, session_id: str, cwd: Path, *,
                      mcp_servers: tuple[ServerSpec, ...] = (),
                      additional_dirs: tuple[Path, ...] = ()) -> Session:
        """A saved session brought back (ACP load/resume): its model, mode, title and plan;
        the open one when it is open already. `additional_dirs` are its roots from now on
        (ACP: the request's list is the whole list, none when omitted); an open session with
        other ones is opened again with these, unless a turn runs (`RootsInUse`)."""
        from talaria.agent.permissions import MODES

        if (open_session := self._reopened(session_id, additional_dirs)) is not None:
            return open_session
        record = self.store.get_session(session_id)
        if record is None:
            raise NoSuchSession(session_id, saved=True)
        history, counted = await anyio.to_thread.run_sync(loaded, self.store, session_id, record.meta)
        if (open_session := self._reopened(session_id, additional_dirs)) is not None:
            return open_session  # opened by another request meanwhile
        if session_id in self.sessions:
            await self.close(session_id)
        moved = stored_dirs(record.meta) != [str(d) for d in additional_dirs]
        if moved:
            self.store.update_session(session_id, meta=dirs_meta(record.meta, additional_dirs))
        opening = Opening(cwd, additional_dirs, session_id=session_id, history=history,
                          title=record.title, mode=record.mode if record.mode in MODES else None,
                          todos=last_todos(history), mcp_servers=mcp_servers,
                          spend=record.meta.get("spend"), counted=counted, prestart=self._at_opening)
        session = await self._open(opening, model=stored_model(record.model))
        if moved:  # its system prompt names the old ones: the model is told
            session.append({"role": "user", "content": roots_note(additional_dirs),
                            "process_note": True})
        return session

    def _reopened(self, session_id: str, additional_dirs: tuple[Path, ...]) -> Session | None:
        """The open session when its roots are `additional_dirs`; None when it is not open or
        may be opened again with other roots; RootsInUse while a turn of it runs."""
        session = self.sessions.get(session_id)
        if session is None or session.additional_dirs == additional_dirs:
            return session
        if session.prompts.busy:
            raise RootsInUse(session_id)
        return None

    async def fork(self, source_id: str, cwd: Path, *,
                   mcp_servers: tuple[ServerSpec, ...] = (),
                   additional_dirs: tuple[Path, ...] = ()) -> Session:
        """A new session with the source's transcript up to now (what a running turn has
        committed so far), its model, mode and plan; the source goes on untouched. Its roots
        are `additional_dirs`, not the source's (ACP: the request's list is the whole list)."""
        source = self.sessions.get(source_id)
        record = self.store.get_session(source_id)
        if record is None:
            raise NoSuchSession(source_id, saved=True)
        model = source.provider.name if source else stored_model(record.model)
        provider = self.provider(model)  # before the copy: a failure leaves no orphan rows
        fork_id = new_session_id()
        store = self.store
        # Copying and parsing a long transcript: megabytes of JSON, in a worker thread (issue 9).
        await anyio.to_thread.run_sync(store.copy_session, source_id, fork_id)
        history = await anyio.to_thread.run_sync(
            lambda: store.messages(fork_id, include_archived=False))
        title = f"{record.title or 'Untitled'} (fork)"[:80]
        store.update_session(fork_id, title=title, meta=dirs_meta(record.meta, additional_dirs))
        todos = source.tool_state.todos if source is not None else last_todos(history) or []
        opening = Opening(cwd, additional_dirs, session_id=fork_id, history=history, title=title,
                          todos=todos,
                          mode=source.permissions.mode if source else None,
                          spend=source.spend.to_json() if source else record.meta.get("spend"),
                          mcp_servers=mcp_servers, prestart=self._at_opening)
        return await self._open(opening, provider=provider)

    async def _open(self, opening: Opening, *, model: str | None = None,
                    environment: str | None = None, provider: Provider | None = None,
                    config: Config | None = None) -> Session:
        config = config or self.config
        if self.editor:  # no model, no session: nothing else is built
            provider = provider or self.provider(model, config)
        if self.editor and opening.mode is None:
            from talaria.agent.modes import editor_mode

            opening = replace(opening, mode=editor_mode(config.mode))
        workspace = self._workspace(config, opening, environment)
        door = self.doors.door(opening.session_id, workspace)
        session = None
        try:
            if not self.editor:  # a missing engine or host is one line now, not a tool error
                from talaria.tools.environments.base import environment_of

                if (env := environment_of(workspace)) is not None:
                    await env.active()
            # Headless: the environment's error first (`--env nope` says so, model or not).
            provider = provider or self.provider(model, config)
            session = new_session(config, opening, door=door, provider=provider,
                                  store=self.store, kernels=self.kernels)
            if not self.editor:  # headless runs want every tool from the first model call
                await tools_ready(session, config.mcp_start_timeout)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(session.close if session else closer(workspace))
            raise
        self.sessions[session.id] = session
        return session

    def _workspace(self, config: Config, opening: Opening, environment: str | None) -> Workspace:
        """The door's workspace in the session's execution environment (started at its first
        tool call, or by `_open` for headless doors)."""
        from talaria.tools.errors import EnvError

        roots = (opening.cwd, *opening.additional_dirs)
        base = self.doors.workspace(opening.session_id, opening.cwd, roots)
        try:
            return environment_workspace(config, base, opening.session_id, environment)
        except EnvError as exc:
            if not self.editor:
                raise
            log.warning("%s; this session runs on local", exc)
            return environment_workspace(config, base, opening.session_id, "local")

    async def close(self, session_id: str) -> None:
        """Stop its turn and queued prompts (they answer `cancelled`), then what its tools
        keep running (a kernel, a background review). NoSuchSession when it is not open."""
        session = self.get(session_id)
        session.prompts.clear()
        self.cancel(session_id)
        session.close()
        self.sessions.pop(session_id, None)

    async def delete(self, session_id: str) -> None:
        """Close it if open, then remove its transcript (NoSuchSession when none was saved)."""
        if session_id in self.sessions:
            await self.close(session_id)
        if not self.store.delete_session(session_id):
            raise NoSuchSession(session_id, saved=True)

    def cancel(self, session_id: str) -> bool:
        """Stop the session's running turn, else the prompt waiting to reach it. A cancel
        with nothing running is a no-op that must not poison the next turn."""
        session = self.sessions.get(session_id)
        if session is None:
            return False
        if session.cancel():
            return True
        if (scope := self.running.get(session_id)) is not None:
            scope.cancel()  # the prompt has not reached its turn yet
            return True
        return False

    async def prompt(self, session: Session, text: str,
                     content: Callable[[], Awaitable[Content]] | None = None) -> Outcome:
        """One prompt: `text` as typed (slash commands, the queue's preview); `content` makes
        what the model gets (default: `text`), once the prompt's turn has come. While a turn
        runs, `/steer` and `/queue` act at once and anything else waits in the session's
        queue (answered when its own turn ends, in order)."""
        from talaria.agent import commands
        from talaria.agent.events import Notice

        command = commands.parse(text)
        if command is not None and command[0] == "steer" and command[1] and not session.prompts.busy:
            # Nothing to steer: an editor would show an error for a note the user meant to send.
            await session.door.emit(Notice("No turn was running to steer, so the note was sent "
                                           "as a prompt."))
            text, content, command = command[1], None, None
        if command is not None and command[0] in commands.LIVE:
            return Outcome(await self._command(session, *command))
        async with session.prompts.turn(text, lambda ahead: queued(session, ahead)) as admitted:
            if not admitted:  # dropped by `/queue clear`
                return Outcome("cancelled")
            return await self._turn(session, text, content, command)

    async def _turn(self, session: Session, text: str,
                    content: Callable[[], Awaitable[Content]] | None,
                    command: tuple[str, str] | None) -> Outcome:
        self.running[session.id] = scope = anyio.CancelScope()
        before = session.spend.copy()  # the turn's tokens: what its calls add to the session's
        try:
            # A cancel may come while the door reads the prompt (resource links through the
            # editor) or during a slash command: before run_turn has a scope, this one catches it.
            with scope:
                await self.load_turn_modules()
                from talaria.agent.loop import run_turn
                from talaria.agent.skills.commands import expand
                from talaria.agent.skills.review import after_turn

                body: Content = await content() if content is not None else text
                if command is not None:
                    reason = await self._command(session, *command)
                    return Outcome(reason, spend=session.spend.since(before))
                blocks = body if isinstance(body, list) else [{"type": "text", "text": body}]
                body = expand(session, text, blocks) or body  # `/SKILL task`
                await tools_ready(session, FIRST_REQUEST_WAIT_S)
            if scope.cancel_called:
                return Outcome("cancelled")
            reason = await self._model_call(run_turn(session, body))
            return Outcome(reason, after_turn(session, self.config) if self.review else None,
                           spend=session.spend.since(before))
        finally:
            if self.running.get(session.id) is scope:
                del self.running[session.id]

    async def _command(self, session: Session, name: str, arg: str) -> str:
        from talaria.agent import commands

        return await self._model_call(commands.run(session, self.config, name, arg))

    async def _model_call(self, call: Awaitable[str]) -> str:
        from talaria.agent.providers.errors import ProviderError

        try:
            return await call
        except ProviderError as exc:
            raise ModelFailure.of(exc) from None

    async def load_turn_modules(self) -> None:
        """Import the turn's modules in a worker thread, once per process. Not on the event
        loop: 0.1 s there held up every other request; and a module another thread is still
        importing would block the loop on its import lock, which is why a first prompt waits
        here, in the loop's terms, rather than importing them itself."""
        await import_once(self.turn_modules)

