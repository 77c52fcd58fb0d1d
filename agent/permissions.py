"""Permission decisions for tool calls, by mode.

Modes (Claude Code's spellings `acceptEdits`, `dontAsk`, `bypassPermissions` are aliases):
    default       ask before edits and commands
    accept_edits  edits inside the project go through; commands ask
    plan          read-only: edits and commands are refused with a message the model sees
    auto          no questions for edits inside the project; commands run without a question
                  inside the sandbox (they ask where this machine has none)
    dont_ask      never asks: what would ask is refused, unless pre-approved (answered
                  `allow_always` earlier in the session)
    bypass        headless `--yes`: everything goes through, unconfined

In every mode but `bypass`: anything outside the session's roots asks, reading a secret asks
(`Sensitive.secret`: keys, `.env`, credentials), writing a guarded path asks (secrets and
`.git/`), and a mode or tool kind this module does not know asks. Nothing unknown is allowed.

A call is judged by what it does (`ToolSpec.call_kind`), not by the tool that asks:
- input or a signal to a live process (`process` write/submit/close/kill) is a command
  (`execute`): its data is the command shown and checked. It runs as that process runs
  (`running`): to a sandboxed one it stays in that sandbox (no question in `auto`), to one the
  user allowed unconfined it is an unconfined command (asks in `auto`; refused in `plan`, and in
  `dont_ask` unless that input to that process was answered `allow_always`). A mode switch
  holds for processes already running: `plan` refuses their input, `dont_ask` what it would
  refuse to start. Reading their output (`list`, `poll`, `log`, `wait`) is a read.
- memory and skill writes are `notes` (the agent's own files in $TALARIA_HOME): no question in
  any mode but `plan`, which refuses them (read-only).
- a subagent's calls are decided by its parent's object (`for_subagent`), in the mode the
  parent is in at the moment of the call; an execute_code script's tool calls each go through
  `decide` when they are made, in the mode in force then.

Answers `allow_always` / `reject_always` are remembered for the session per (kind, path), and
for commands per (kind, command text), for process input per (input, process). A command the
user has not seen (auto mode, or a remembered allow) runs in the sandbox `Decision.sandbox`: the
project writable, the rest read-only, credential stores hidden, and every path whose edit the
user rejected read-only, so a refused edit cannot be made through a command however it is
spelt. A command that mentions such a path also asks again, so the user sees the attempt.
Where the sandbox cannot hold (no tier here, a rejected file with a second hard link, a path
rejected after a sandboxed process started) such a command asks instead.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from talaria.agent.modes import ALIASES, ALL_MODES, MODES, normalize_mode
from talaria.tools.paths import Sensitive, inside_roots
from talaria.tools.registry import KINDS, NOTES, Running

__all__ = ["ALIASES", "ALL_MODES", "MODES", "Decision", "PermissionAsk", "Permissions", "normalize_mode"]

if TYPE_CHECKING:
    from talaria.tools.sandbox.tiers import SandboxSpec

READ_KINDS = frozenset({"read", "search", "think"})
"""Kinds with no effect outside the session (`think`: the todo list)."""
WRITE_KINDS = frozenset({"edit", "delete", "move"})
EDITS_UNASKED = frozenset({"accept_edits", "auto"})
COMMANDS_UNASKED = frozenset({"auto"})
OPTIONS = ("allow_once", "allow_always", "reject_once", "reject_always")
PLAN_REFUSAL = "Plan mode is read-only: edits and commands are not allowed. Describe the change instead."
PLAN_NOTES = ("Plan mode is read-only: memory and skills are not written in it. Say what you "
              "would save instead.")
UNCONFINED = ("input to {id} (`{command}`), which the user allowed to run outside the sandbox, "
              "runs unconfined")
NO_SANDBOX = ("no sandbox on this machine (neither bubblewrap nor Landlock works), so a "
              "command that would run without a question asks")


@dataclass(frozen=True, slots=True)
class PermissionAsk:
    """What the user is asked about; `tool_call_id` is the card already shown."""

    tool_call_id: str
    tool: str
    kind: str
    title: str
    paths: tuple[str, ...]
    reason: str
    diff: dict[str, Any] | None = None
    """For an edit: {path, old_text (None: a new file), new_text}, what allowing it writes."""


Asker = Callable[[PermissionAsk], Awaitable[str]]
"""Returns one of OPTIONS, "cancelled", or UNASKED."""
UNASKED = "unasked"
"""An asker's answer when nobody could be asked (the editor has no permission UI: its
`session/request_permission` failed): refused, but not as the user's refusal."""
Preview = Callable[[], Awaitable[dict[str, Any] | None]]
"""Computes an edit's diff for the question (`PermissionAsk.diff`), only when one is asked."""


async def deny_all(ask: PermissionAsk) -> str:
    return "reject_once"


@dataclass(frozen=True, slots=True)
class Decision:
    refusal: str | None = None
    """The message the model sees when the call may not run; None when it may."""
    sandbox: SandboxSpec | None = None
    """Set for a command the user has not seen: it runs confined by this."""
    conceal: Callable[[Path], bool] | None = None
    """Set for a search that did not target a secret: its results skip these paths."""


@dataclass(slots=True)
class Permissions:
    roots: tuple[Path, ...]
    mode: str
    asker: Asker = deny_all
    home: Path = field(default_factory=Path.home)
    read_roots: tuple[Path, ...] = ()
    """Extra places read without asking, e.g. execute_code's saved outputs in the cache."""
    sensitive: Sensitive | None = None
    """Which paths are secrets; default: `Sensitive(home)`."""
    network: bool = False
    """Whether sandboxed commands may use the network (`sandbox_network`)."""
    sandbox_tier: str | None = None
    """The tier for sandboxed commands; None: detected on first use."""
    remembered: dict[tuple[str, str], bool] = field(default_factory=dict)
    rejected_paths: set[str] = field(default_factory=set)
    parent: Permissions | None = None
    """A subagent's: every decision is its parent's, made at the moment of the call (the mode
    the parent is in then, its remembered answers and rejected paths); only the question goes
    through this object's `asker` (the subagent's card). This object's `mode` is not read."""

    def __post_init__(self) -> None:
        if self.sensitive is None:
            self.sensitive = Sensitive(self.home)

    def for_subagent(self, asker: Asker) -> Permissions:
        """The permissions of a subagent that asks through `asker`: they follow these."""
        return replace(self, asker=asker, parent=self)

    async def check(
        self, *, tool_call_id: str, tool: str, kind: str, title: str,
        paths: tuple[Path, ...], command: str | None = None, preview: Preview | None = None,
        running: Running | None = None,
    ) -> str | None:
        """None when the call may run, else the refusal message the model sees."""
        decision = await self.decide(tool_call_id=tool_call_id, tool=tool, kind=kind,
                                     title=title, paths=paths, command=command, preview=preview,
                                     running=running)
        return decision.refusal

    async def decide(
        self, *, tool_call_id: str, tool: str, kind: str, title: str,
        paths: tuple[Path, ...], command: str | None = None, preview: Preview | None = None,
        running: Running | None = None, asker: Asker | None = None,
    ) -> Decision:
        """Whether the call may run, asking the user when the mode says so, and how.
        `preview` computes the diff shown with the question (only when one is asked);
        `running`: the live process the call sends input or a signal to (judged by how that
        process runs); `asker`: who is asked (default `self.asker`)."""
        asker = asker or self.asker
        if self.parent is not None:
            return await self.parent.decide(
                tool_call_id=tool_call_id, tool=tool, kind=kind, title=title, paths=paths,
                command=command, preview=preview, running=running, asker=asker)
        if self.mode == "bypass":
            return Decision()
        keys = _keys(kind, paths, command or tool, running)
        if any(self.remembered.get(k) is False for k in keys):
            return Decision(f"The user rejected {kind} of {', '.join(k[1] for k in keys)} for this session.")
        reason = self._reason_to_ask(kind, paths, command)
        if reason is not None and reason.startswith("refuse:"):
            return Decision(reason.removeprefix("refuse:"))
        approved = "rejected" not in (reason or "") and all(
            self.remembered.get(k) is True for k in keys)
        if reason is None or approved:
            if kind != "execute":
                return self._allowed(kind, paths)
            held = self._held_by(running, approved) if running else await self._confinement()
            if not isinstance(held, str):
                return Decision(sandbox=held)
            reason = held
        if self.mode == "dont_ask":
            return Decision(f"Refused without asking ({reason}): in dont_ask mode only what the "
                            "user approved before with 'allow always' runs.")
        diff = await preview() if preview is not None else None
        answer = await asker(PermissionAsk(
            tool_call_id, tool, kind if kind in KINDS else "other", title,
            tuple(map(str, paths)), reason, diff))
        if answer in ("allow_always", "reject_always"):
            for k in keys:
                self.remembered[k] = answer == "allow_always"
        if answer in ("allow_once", "allow_always"):
            if kind in WRITE_KINDS:
                self.rejected_paths.difference_update(str(p) for p in paths)
            return self._allowed(kind, paths)  # the user saw this call: it runs as asked
        if answer == UNASKED:  # nobody said no: nothing is remembered as rejected
            return Decision(unasked_refusal(kind))
        if kind in WRITE_KINDS:
            self.rejected_paths.update(str(p) for p in paths)
        if answer == "cancelled":
            return Decision("The permission request was cancelled.")
        return Decision("The user rejected this tool call.")

    def _held_by(self, running: Running, approved: bool) -> None | str:
        """Input or a signal to a live process runs as that process does: None when its
        sandbox holds it (or the user approved exactly this before), else why it must ask."""
        if approved:
            return None  # "allow always" was answered for exactly this, to this process
        if not running.confined:
            return UNCONFINED.format(id=running.id, command=_short(running.command))
        # Only the project is writable in a sandbox: a path rejected outside it is held anyway.
        if later := sorted(p for p in set(self.rejected_paths) - running.readonly
                           if inside_roots(Path(p), self.roots)):
            return (f"{', '.join(later)}, whose edit was rejected after {running.id} started, "
                    "is writable in its sandbox")
        if linked := [p for p in sorted(self.rejected_paths) if _hard_linked(p)]:
            return f"{', '.join(linked)}, whose edit was rejected, has another hard link " \
                "the sandbox cannot keep read-only"
        return None

    def _allowed(self, kind: str, paths: tuple[Path, ...]) -> Decision:
        assert self.sensitive is not None
        if kind == "search" and not any(map(self.sensitive.secret, paths)):
            return Decision(conceal=self.sensitive.secret)
        return Decision()

    def _reason_to_ask(
        self, kind: str, paths: tuple[Path, ...], command: str | None
    ) -> str | None:
        """None: the mode allows the call; "refuse:..."; else why the user is asked."""
        assert self.sensitive is not None
        if self.mode not in ALL_MODES:
            return f"unknown permission mode {self.mode!r}"
        if self.mode == "plan" and kind not in READ_KINDS:
            return "refuse:" + (PLAN_NOTES if kind == NOTES else PLAN_REFUSAL)
        if kind == NOTES:  # the agent's own notes in $TALARIA_HOME: no project path to judge
            return None
        readable = self.roots + self.read_roots if kind in READ_KINDS else self.roots
        outside = [p for p in paths if not inside_roots(p, readable)]
        if outside:
            return f"outside the project: {', '.join(map(str, outside))}"
        if command and self.rejected_paths:
            hits = [p for p in self.rejected_paths if _mentions(command, p, self.roots)]
            if hits:
                return f"the command touches {', '.join(hits)}, whose edit was rejected"
        if kind in WRITE_KINDS and (again := [str(p) for p in paths if str(p) in self.rejected_paths]):
            return f"an edit of {', '.join(again)} was rejected before"
        check = self.sensitive.secret if kind in READ_KINDS else self.sensitive.guarded
        if sensitive := [p for p in paths if check(p)]:
            return f"sensitive path: {', '.join(map(str, sensitive))}"
        if kind in READ_KINDS:
            return None
        if kind in WRITE_KINDS:
            return None if self.mode in EDITS_UNASKED else "edit"
        if kind == "execute":
            return None if self.mode in COMMANDS_UNASKED else "command"
        return f"a tool of kind {kind!r}"

    async def _confinement(self) -> SandboxSpec | str:
        """The sandbox for a command the user has not seen, else why it must ask."""
        from talaria.tools.sandbox.tiers import command_spec, detect_tier  # start-up stays light

        assert self.sensitive is not None
        if self.sandbox_tier is None:
            self.sandbox_tier = await anyio.to_thread.run_sync(detect_tier)
        if self.sandbox_tier == "rlimits":
            return NO_SANDBOX
        # A second hard link shares the inode: writing through it would change the file
        # whatever the sandbox does to this name.
        if linked := [p for p in sorted(self.rejected_paths) if _hard_linked(p)]:
            return f"{', '.join(linked)}, whose edit was rejected, has another hard link " \
                "the sandbox cannot keep read-only"
        # Off the event loop: `sensitive_paths` globs may walk directories.
        hidden = await anyio.to_thread.run_sync(self.sensitive.hidden_paths)
        return command_spec(
            self.roots, readonly=tuple(Path(p) for p in sorted(self.rejected_paths)),
            hidden=hidden, network=self.network, tier=self.sandbox_tier,
        )


def _hard_linked(path: str) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_nlink > 1


def _short(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def _keys(kind: str, paths: tuple[Path, ...], command: str,
          running: Running | None = None) -> list[tuple[str, str]]:
    """What an answer is remembered for: the command itself for commands (not their
    directory: approving `make` approves no other command), for input to a process the input
    and that process, else each path."""
    if running is not None:
        return [(kind, f"{command} (to {running.id})")]
    if kind == "execute" or not paths:
        return [(kind, command)]
    return [(kind, str(p)) for p in paths]


def _mentions(command: str, path: str, roots: tuple[Path, ...]) -> bool:
    if path in command:
        return True
    for root in roots:
        try:
            relative = str(Path(path).relative_to(root))
        except ValueError:
            continue
        if relative in command:
            return True
    return False


def unasked_refusal(kind: str) -> str:
    """The result of a call nobody could be asked about, with what would allow it: the modes
    that run this kind of call without a question (never one that would not)."""
    allow = {
        "edit": "switch the session's mode to accept_edits (edits in the project) or auto",
        "delete": "switch the session's mode to accept_edits (edits in the project) or auto",
        "move": "switch the session's mode to accept_edits (edits in the project) or auto",
        "execute": "switch the session's mode to auto (commands run in the sandbox)",
    }.get(kind, "use an editor that can show permission questions, or allow it with 'allow "
                "always' there once")
    return ("Not run: the editor could not ask the user about this call (it cannot show "
            f"permission questions), so nobody allowed it. To allow it, {allow}.")
