"""The tool registry: one typed spec per tool. Imports nothing from the project.

A `ToolSpec` renders the provider tool definition and (later) the `execute_code` stubs, so
there is never a second hand-kept copy of a tool's name, description or parameters.
Handlers return a result dict; failures are results with an `error` key, never exceptions.
Keys starting with `_` are for front doors only (diffs, terminal ids) and never reach the model.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

# ACP tool kinds.
KINDS = ("read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other")
NOTES = "notes"
"""A permission kind that is no ACP kind: writing the agent's own notes outside the project
(memory, skills in $TALARIA_HOME). Its card shows the tool's `kind`."""
EFFECTS = (*KINDS, NOTES)
"""What `ToolSpec.call_kind` may return: the kinds the permission policy judges."""
WEB_SCHEMES = ("http://", "https://")

Handler = Callable[[dict[str, Any], Any], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Running:
    """A live process a call acts on (input to it, a signal): the permission policy judges
    the call by how that process runs, not by the tool that reaches it."""

    id: str
    command: str
    """What the user allowed to start."""
    confined: bool
    """It runs in the sandbox (unseen by the user); False: unconfined, as the user saw it."""
    readonly: frozenset[str] = frozenset()
    """The paths its sandbox keeps read-only (the rejected edits when it started)."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str | Callable[[], str]
    """What the model reads. A callable is called when the text is needed (execute_code's
    lists the other tools' specs, which must be registered by then)."""
    parameters: dict[str, Any]
    handler: Handler
    kind: str = "other"
    """ACP tool kind, also used for permission decisions (edit / execute ask)."""
    kind_of: Callable[[dict[str, Any]], str] | None = None
    """The kind of one call when its arguments decide what it does (one of `EFFECTS`):
    `process(action="submit")` runs a command, `process(action="poll")` reads."""
    command_of: Callable[[dict[str, Any]], str | None] | None = None
    """What a call runs when no single argument holds it (the input sent to a process)."""
    target: Callable[[dict[str, Any], Any], Running | None] | None = None
    """The live process a call acts on, looked up in the session's `ToolState` just before
    the permission check; None: the call acts on no running process."""
    parallel_safe: bool = False
    """True when calls never conflict (read-only); path-scoped tools use `path_args`."""
    path_args: tuple[str, ...] = ()
    """Argument names holding file paths: locations, overlap checks, root policy."""
    url_args: tuple[str, ...] = ()
    """Of `path_args`, those that may hold a URL instead (`talaria.tools.paths.is_url`): such
    a value is no path; an http(s) one makes the call a `fetch` for the permission policy."""
    default_path: bool = False
    """A call without a path acts on the project root (search_files, terminal)."""
    command_arg: str | None = None
    """The argument holding what the call runs (a shell command, a script): shown when
    asking, and checked against paths whose edit the user rejected."""
    exclusive: bool = False
    """Calls run alone, never beside another call of the same turn (commands, scripts)."""
    title: Callable[[dict[str, Any]], str] | None = None
    """Short human title for a call, e.g. 'Read src/app.py'."""
    toolset: str = "core"
    call_paths: Callable[[dict[str, Any], Any], tuple[str, ...]] | None = None
    """Paths a call reads beyond its `path_args`, from its arguments and the session's
    `ToolState` (session_search with scope="all": the store of every project's sessions).
    They are judged like `path_args` paths (outside the roots asks); it must not raise."""
    preview: Callable[[dict[str, Any], Any], Awaitable[dict[str, Any] | None]] | None = None
    """What a call would change, without changing it: `{"path", "old_text", "new_text"}` (the
    `_diff` item of its result), or None when it cannot tell. Shown when permission is asked."""

    def text(self) -> str:
        """The description, built now if it is built on demand."""
        return self.description() if callable(self.description) else self.description

    def definition(self) -> dict[str, Any]:
        """Provider-neutral definition: {name, description, parameters}."""
        return {"name": self.name, "description": self.text(), "parameters": self.parameters}

    def call_kind(self, args: dict[str, Any]) -> str:
        """The kind of one call, which the permission policy judges: `kind_of`'s; `fetch`
        when a `url_args` argument holds an http(s) URL; else `kind`."""
        if self.kind_of is not None:
            kind = self.kind_of(args)
            return kind if kind in EFFECTS else "other"  # unknown: the policy asks
        for name in self.url_args:
            value = args.get(name)
            if isinstance(value, str) and value.strip().lower().startswith(WEB_SCHEMES):
                return "fetch"
        return self.kind

    def card_kind(self, args: dict[str, Any]) -> str:
        """The ACP kind of one call's card: `call_kind`, or `kind` where that is no ACP kind."""
        kind = self.call_kind(args)
        return kind if kind in KINDS else self.kind

    def command(self, args: dict[str, Any]) -> str | None:
        """What a call will run (`command_of`, else `command_arg`), if it is a string."""
        if self.command_of is not None:
            value = self.command_of(args)
        else:
            value = args.get(self.command_arg) if self.command_arg else None
        return value if isinstance(value, str) else None

    def call_title(self, args: dict[str, Any]) -> str:
        if self.title is None:
            return self.name
        try:
            return self.title(args)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            return self.name  # a malformed argument must not break the card


class ToolSource(Protocol):
    """Tools that come and go during a session (an MCP server's, once it is up): a session
    asks its sources at every model call, so the tools offered can change between calls."""

    def specs(self) -> list[ToolSpec]:
        """The tools offered now."""
        ...

    def script_specs(self) -> list[ToolSpec]:
        """Those of `specs()` that execute_code scripts may call."""
        ...

    def notices(self) -> list[str]:
        """What the user should be told since the last call (a server failed, came back);
        each notice is returned once."""
        ...


@dataclass(slots=True)
class Registry:
    specs: dict[str, ToolSpec] = field(default_factory=dict)

    def register(self, spec: ToolSpec) -> ToolSpec:
        if spec.kind not in KINDS:
            raise ValueError(f"unknown tool kind {spec.kind!r} for {spec.name}")
        self.specs[spec.name] = spec
        return spec

    def get(self, name: str) -> ToolSpec | None:
        return self.specs.get(name)

    def select(self, names: list[str] | None = None) -> list[ToolSpec]:
        if names is None:
            return list(self.specs.values())
        return [self.specs[n] for n in names if n in self.specs]

    def definitions(self, names: list[str] | None = None) -> list[dict[str, Any]]:
        return [spec.definition() for spec in self.select(names)]


REGISTRY = Registry()


def tool(**kwargs: Any) -> Callable[[Handler], Handler]:
    """Decorator: register the decorated coroutine as a tool's handler."""

    def wrap(handler: Handler) -> Handler:
        REGISTRY.register(ToolSpec(handler=handler, **kwargs))
        return handler

    return wrap
