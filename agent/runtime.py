"""Wiring: build a ready Session from configuration, for every front door."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from talaria.agent import vision
from talaria.agent.config import Config
from talaria.agent.context.live import COUNTED_META, Resumed
from talaria.agent.door import FrontDoor
from talaria.agent.ids import new_session_id
from talaria.agent.permissions import Permissions
from talaria.agent.pricing import Spend
from talaria.agent.prompt import system_prompt
from talaria.agent.providers.base import Provider
from talaria.agent.providers.configured import make_provider
from talaria.agent.session import Session
from talaria.agent.skills.setup import attach as attach_learning
from talaria.agent.skills.setup import prompt_sections
from talaria.agent.store import Store
from talaria.agent.transcript import (
    Message,
    ToolMessage,
    calls_of,
    is_tool_result,
    last_assistant,
    results_by_call,
)
from talaria.tools.builtin import CORE_TOOLS, DEFAULT_TOOLS, load_builtin_tools
from talaria.tools.clarify import NO_ANSWER
from talaria.tools.execute_code.env import ExecSettings
from talaria.tools.execute_code.tool import session_spec
from talaria.tools.handoffs import Answer, Clarifier, DelegateRequest, Question
from talaria.tools.paths import Sensitive
from talaria.tools.state import ToolState

if TYPE_CHECKING:
    from talaria.tools.environments.base import EnvWorkspace
    from talaria.tools.execute_code.pool import KernelPool
    from talaria.tools.mcp.settings import ServerSpec
    from talaria.tools.workspace import Workspace

log = logging.getLogger(__name__)


def open_store(config: Config) -> Store:
    return Store(config.home / "sessions.db")


def environment_workspace(config: Config, base: Workspace, session_id: str,
                          name: str | None = None) -> EnvWorkspace:
    """`base` (the door's own workspace) in the session's execution environment: `name`
    (NAME[:ARG]) or the configured one. Not started yet; EnvError for a bad name or table."""
    from talaria.tools.environments.base import EnvWorkspace, open_environment
    from talaria.tools.environments.spec import resolve

    spec = resolve(name or config.environment, config.environments)
    extra = tuple(root for root in base.roots if root != base.cwd)  # additional directories
    env = open_environment(spec, cwd=base.cwd, session_id=session_id, home=config.home,
                           extra=extra)
    return EnvWorkspace(base, env)


@dataclass(frozen=True, slots=True)
class Opening:
    """What a session starts with beyond configuration: where, as whom, and with what state.
    A session comes back from `new_session` finished: nothing is set on it afterwards."""

    cwd: Path
    additional_dirs: tuple[Path, ...] = ()
    """More roots of the project beside `cwd` (ACP `additionalDirectories`, `--add-dir`):
    inside the project for every tool, its sandboxes, checkpoints and environment."""
    session_id: str = field(default_factory=lambda: new_session_id())
    """Made before the session, because its door is bound to it."""
    mode: str | None = None
    """None: the configured mode."""
    tool_names: tuple[str, ...] = DEFAULT_TOOLS
    history: list[Message] | None = None
    """A stored session brought back (the store is left as it is); None: a new one."""
    title: str | None = None
    todos: list[dict[str, Any]] | None = None
    """The todo list it starts with (a restored or forked session keeps its plan)."""
    mcp_servers: tuple[ServerSpec, ...] = ()
    """The editor's (ACP `mcpServers`); config's `[mcp_servers]` are added. They start now, in
    the background."""
    allowed_tools: frozenset[str] | None = None
    """When set, the only tools a call may dispatch to (`Session.allowed_tools`)."""
    spend: dict[str, Any] | None = None
    """A stored session's spend so far (`pricing.Spend.to_json`, kept in its record's meta)."""
    counted: Resumed | None = None
    """A stored session's kept token count, checked against `history` (`live.resumed`)."""
    prestart: bool = False
    """`prestart` the session as it opens (call on the event loop's thread); an editor's door
    does it once its answer is out instead (`SessionHost.warm`)."""


def new_session(config: Config, opening: Opening, *, door: FrontDoor, provider: Provider,
                store: Store | None, kernels: KernelPool | None = None) -> Session:
    """A finished session as `opening` describes it. `door` is bound to `opening.session_id`;
    `kernels` is a pool a host shares among its sessions (None: the session has its own)."""
    registry = load_builtin_tools()
    cwd, tool_names = opening.cwd, opening.tool_names
    tool_state = ToolState(
        exec_settings=ExecSettings(
            mode=config.exec_mode, timeout=config.exec_timeout,
            env_passthrough=config.exec_env_passthrough,
            cache_dir=config.home / "cache" / "exec", roots=opening.additional_dirs,
        ),
        kernels=kernels,
    )
    names = _web_tools(config, tool_state, tool_names)
    names = tuple(n for n in names if n != vision.TOOL)
    if vision.offered(config, provider.name, tool_names, DEFAULT_TOOLS):
        names = (*names, vision.TOOL)
    _mcp(config, tool_state, cwd, list(opening.mcp_servers))
    tools = [session_spec(tool_state) if spec.name == "execute_code" else spec
             for spec in registry.select(list(names))]
    session = Session(
        id=opening.session_id,
        cwd=cwd,
        additional_dirs=opening.additional_dirs,
        door=door,
        provider=provider,
        tools=tools,
        permissions=Permissions(
            roots=door.workspace.roots, mode=opening.mode or config.mode, asker=door.ask,
            read_roots=tuple(config.home / "cache" / d for d in ("exec", "web", "mcp")),
            sensitive=Sensitive(Path.home(), config.home, config.sensitive_paths),
            network=config.sandbox_network,
        ),
        store=store,
        context_window=config.window_for(provider.name),
        max_turns=config.max_turns,
        max_tokens=config.max_tokens,
        compact_threshold=config.compact_threshold,
        supports_images=config.supports_images(provider.name),
        reasoning_effort=config.reasoning_effort,
        tool_state=tool_state,
        title=opening.title,
        allowed_tools=opening.allowed_tools,
    )
    if opening.todos is not None:
        tool_state.todos = [dict(t) for t in opening.todos]
    session.spend = _spend(config, opening)
    session.tool_state.vision = vision.vision_state(
        config, session, lambda: make_provider(config, config.vision_model))
    from talaria.tools.environments.base import environment_of

    if (env := environment_of(door.workspace)) is not None:  # torn down with the session
        session.tool_state.cleanups["environment"] = env.close
    if store is not None:
        from talaria.agent.recall import reach, session_search

        session.tool_state.recall = partial(session_search, store, cwd=cwd, session_id=session.id)
        session.tool_state.recall_reach = partial(reach, store, cwd=cwd)
    else:  # nothing to search: not offered (rather than offered and failing)
        session.tools = [t for t in session.tools if t.name != "session_search"]
    _wire_turn_features(config, session)
    if config.summary_model:
        from talaria.agent.context.summarizer import ProviderSummarizer

        session.summarizer = ProviderSummarizer(make_provider(config, config.summary_model),
                                                spend=session.spend)
    attach_learning(session, config)
    if opening.prestart:
        prestart(session)
    if store is not None:  # each exact count is kept: a loaded session goes on from it
        session.context.on_counted = lambda counted: store.update_session(
            session.id, meta={COUNTED_META: counted.to_json()})
    if opening.history is not None:
        session.context.replace(opening.history)
        session.context.resume(opening.counted)
        for message in dangling_results(session.messages):
            session.append(message)  # a crash mid-tool: the call gets an honest result
        return session
    if store is not None:
        store.create_session(session.id, str(cwd), model=provider.name, mode=session.permissions.mode,
                             meta=dirs_meta({}, opening.additional_dirs))
    extra = prompt_sections(session)
    text = system_prompt(cwd, opening.additional_dirs)
    session.append({"role": "system", "content": text + (f"\n{extra}\n" if extra else "")})
    return session


def _spend(config: Config, opening: Opening) -> Spend:
    """A new session's spend, or a stored one's total so far. A stored session with model
    calls but no stored total (saved before totals were kept) has an unknown cost."""
    stored = Spend.from_json(opening.spend, config.prices)
    if stored is not None:
        return stored
    spend = Spend(config.prices)
    if any("usage" in m for m in opening.history or ()):
        spend.cost = None
    return spend


def prestart(session: Session) -> None:
    """Warm what the first turn would start: the execute_code kernel (when tools run here), so
    that the first script costs what a warm one does, and the checkpoints' index. Call on the
    event loop's thread (it spawns the kernel's process); it returns at once."""
    from talaria.tools.environments.base import environment_of

    if session.checkpoints is not None:
        from talaria.agent.checkpoints import TurnCheckpoints

        if isinstance(session.checkpoints, TurnCheckpoints):  # a subagent's go through its parent's
            session.checkpoints.prime()  # the first turn's checkpoint then costs a later one's
    env = environment_of(session.door.workspace)
    if session.tool("execute_code") is not None and (env is None or env.is_local):
        from talaria.tools.execute_code.tool import prestart as prestart_kernel

        prestart_kernel(session.tool_state, session.cwd, session.id)


def _wire_turn_features(config: Config, session: Session) -> None:
    """What tools reach through the session: subagents, questions to the user, checkpoints."""
    if session.tool("delegate_task") is not None:
        session.tool_state.delegate = partial(_delegate, config, session)
    question = session.door.clarifier
    if question is not None:
        session.tool_state.clarify = _clarifier(session, question)

    async def announce(text: str) -> None:  # a background process ended
        from talaria.agent.events import Notice

        await session.door.emit(Notice(text))

    session.tool_state.announce = announce
    if config.checkpoints:
        from talaria.agent.checkpoints import TurnCheckpoints

        session.checkpoints = TurnCheckpoints(
            config.home, session.cwd, session.id, session.additional_dirs)


async def _delegate(config: Config, session: Session, request: DelegateRequest) -> dict[str, Any]:
    """`delegate_task`'s subagents. Their machinery is imported at the first call (with the
    turn's modules, `host.TURN_MODULES`), not by every session's opening."""
    from talaria.agent.subagents import Delegator

    return await Delegator(config, session, spawn_subagent)(request)


def spawn_subagent(config: Config, *, cwd: Path, door: FrontDoor, provider: Provider, mode: str,
                   kernels: KernelPool, additional_dirs: tuple[Path, ...] = ()) -> Session:
    """A subagent's session (`subagents.Delegator` finishes it from its parent): no store,
    no tools of its own yet."""
    opening = Opening(cwd, additional_dirs, mode=mode, tool_names=())
    return new_session(config, opening, door=door, provider=provider, store=None, kernels=kernels)


DIRS_META = "additional_directories"
"""The key of a stored session's additional directories in its `meta`."""


def dirs_meta(meta: dict[str, Any], dirs: tuple[Path, ...]) -> dict[str, Any]:
    """A stored session's `meta` with `dirs` as its additional directories (an empty list for
    none: `Store.update_session` merges keys, so a key left out would keep the old list)."""
    return {**meta, DIRS_META: [str(d) for d in dirs]}


def stored_dirs(meta: dict[str, Any]) -> list[str]:
    """A stored session's additional directories (none for sessions stored before them)."""
    dirs = meta.get(DIRS_META)
    return [d for d in dirs if isinstance(d, str)] if isinstance(dirs, list) else []


def _clarifier(session: Session, question: Clarifier) -> Clarifier:
    """The door's way to ask, unless the mode says nobody is asked (dont_ask, bypass)."""

    async def ask(q: Question) -> Answer:
        if session.permissions.mode in ("dont_ask", "bypass"):
            return Answer(None, NO_ANSWER)
        return await question(q)

    return ask


def _web_tools(config: Config, state: ToolState, tool_names: tuple[str, ...]) -> tuple[str, ...]:
    """Configure the web tools; returns `tool_names` with the web tools the configuration
    offers, and without those it does not (a tool offered and then failing misleads)."""
    from talaria.tools.web.settings import WEB_TOOLS, web_settings

    names = tuple(n for n in tool_names if n not in WEB_TOOLS)
    if config.web_search is None and config.web_extract is None:
        return names
    settings, problems = web_settings(
        search=config.web_search, extract=config.web_extract, endpoint=config.web_endpoint,
        allow=config.web_allow_networks, env=config.provider_env(),
        cache_dir=config.home / "cache" / "web", cache_ttl=config.web_cache_ttl)
    for problem in problems:
        log.warning("web tools: %s", problem)
    if settings is None:
        return names
    from talaria.tools.web.pages import WebState

    # The default tool set gets every configured web tool; a chosen set (batch toolsets)
    # only those it names.
    offered = tuple(n for n in settings.tools() if tool_names in (CORE_TOOLS, DEFAULT_TOOLS) or n in tool_names)
    if offered:
        state.web = WebState(settings)
        state.web.warm()
        state.script_tools = offered
    return (*names, *offered)


def _mcp(config: Config, state: ToolState, cwd: Path, editor: list[ServerSpec]) -> None:
    """Start the session's MCP servers (the editor's, then config's) in the background."""
    if not editor and not config.mcp_servers:
        return
    from talaria.tools.mcp.manager import McpManager
    from talaria.tools.mcp.settings import combine

    try:
        servers = combine(editor, config.mcp_servers)
    except ValueError as exc:  # a bad [mcp_servers] table: the session goes on without them
        log.warning("config.toml: %s", exc)
        servers = list(editor)
    manager = McpManager(
        servers, cwd=cwd, start_timeout=config.mcp_start_timeout,
        call_timeout=config.mcp_call_timeout, script_tools=config.mcp_script_tools,
        cache_dir=config.home / "cache" / "mcp")
    manager.start()
    state.sources.append(manager)
    state.cleanups["mcp"] = manager.close


async def tools_ready(session: Session, timeout: float) -> None:
    """Wait (at most `timeout` s) for tools still arriving (MCP servers starting): headless
    runs want every tool from the first model call; editors do not wait."""
    for source in session.tool_state.sources:
        wait = getattr(source, "wait_ready", None)
        if wait is not None:
            await wait(timeout)


def dangling_results(messages: Sequence[Message]) -> list[ToolMessage]:
    """Results for tool calls that never got one (the process died while they ran)."""
    answered = results_by_call(messages)
    return [
        {"role": "tool", "tool_call_id": call["id"], "name": call["name"], "status": "failed",
         "content": '{"error": "Interrupted: Talaria stopped before this call finished."}',
         "display": [{"type": "text", "text": "Interrupted before it finished."}]}
        for call in calls_of(last_assistant(messages) or {})
        if call["id"] not in answered
    ]


def last_todos(messages: list[Message]) -> list[dict[str, Any]] | None:
    """The todo list as the last `todo` call left it (a restored session keeps its plan)."""
    for message in reversed(messages):
        if is_tool_result(message) and message.get("name") == "todo":
            try:
                data = json.loads(message.get("content") or "")
            except json.JSONDecodeError:
                continue
            todos = data.get("todos") if isinstance(data, dict) else None
            if isinstance(todos, list):
                return todos
    return None
