"""Permission decisions for tool calls, by mode.

Modes:
    default       ask before edits and commands
    accept_edits  edits inside the project go through; commands ask
    plan          read-only: edits and commands are refused with a message the model sees
    dont_ask      no prompts, except sensitive paths (.git/, .env*, ~/.ssh, keys)
    bypass        headless `--yes`: everything goes through

Anything outside the session's roots asks in every mode but `bypass`. Answers
`allow_always` / `reject_always` are remembered for the session per (kind, path). A rejected
path stays guarded: a command that mentions it is asked again, showing the rejection, so an
edit refused through `patch` cannot be slipped through `terminal`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from talaria.tools.paths import inside_roots, is_sensitive

MODES = ("default", "accept_edits", "plan", "dont_ask")
WRITE_KINDS = frozenset({"edit", "delete", "move"})
ACT_KINDS = WRITE_KINDS | {"execute"}
OPTIONS = ("allow_once", "allow_always", "reject_once", "reject_always")


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
    """For an edit: what it would change, `{"path", "old_text" (None: new file), "new_text"}`."""


Asker = Callable[[PermissionAsk], Awaitable[str]]
"""Returns one of OPTIONS, or "cancelled"."""


async def deny_all(ask: PermissionAsk) -> str:
    return "reject_once"


@dataclass(slots=True)
class Permissions:
    roots: tuple[Path, ...]
    mode: str = "default"
    asker: Asker = deny_all
    home: Path = field(default_factory=Path.home)
    read_roots: tuple[Path, ...] = ()
    """Extra places read without asking, e.g. execute_code's saved outputs in the cache."""
    remembered: dict[tuple[str, str], bool] = field(default_factory=dict)
    rejected_paths: set[str] = field(default_factory=set)

    async def check(
        self, *, tool_call_id: str, tool: str, kind: str, title: str,
        paths: tuple[Path, ...], command: str | None = None,
        preview: Callable[[], Awaitable[dict[str, Any] | None]] | None = None,
    ) -> str | None:
        """None when the call may run, else the refusal message the model sees. `preview`
        computes the diff shown with the question (only when one is asked)."""
        keys = [(kind, str(p)) for p in paths] or [(kind, command or tool)]
        if self.mode != "bypass" and any(self.remembered.get(k) is False for k in keys):
            return f"The user rejected {kind} of {', '.join(k[1] for k in keys)} for this session."
        reason = self._reason_to_ask(kind, paths, command)
        if reason is None:
            return None
        if reason.startswith("refuse:"):
            return reason.removeprefix("refuse:")
        if all(self.remembered.get(k) is True for k in keys) and "rejected" not in reason:
            return None
        diff = await preview() if preview is not None else None
        answer = await self.asker(
            PermissionAsk(tool_call_id, tool, kind, title, tuple(map(str, paths)), reason, diff)
        )
        if answer in ("allow_always", "reject_always"):
            for k in keys:
                self.remembered[k] = answer == "allow_always"
        if answer in ("allow_once", "allow_always"):
            return None
        if kind in WRITE_KINDS:
            self.rejected_paths.update(str(p) for p in paths)
        if answer == "cancelled":
            return "The permission request was cancelled."
        return "The user rejected this tool call."

    def _reason_to_ask(
        self, kind: str, paths: tuple[Path, ...], command: str | None
    ) -> str | None:
        if self.mode == "bypass":
            return None
        if self.mode == "plan" and kind in ACT_KINDS:
            return "refuse:Plan mode is read-only: edits and commands are not allowed. " \
                "Describe the change instead."
        readable = self.roots + self.read_roots if kind in ("read", "search") else self.roots
        outside = [p for p in paths if not inside_roots(p, readable)]
        if outside:
            return f"outside the project: {', '.join(map(str, outside))}"
        if command and self.rejected_paths:
            hits = [p for p in self.rejected_paths if _mentions(command, p, self.roots)]
            if hits:
                return f"the command touches {', '.join(hits)}, whose edit was rejected"
        if kind in WRITE_KINDS and (again := [str(p) for p in paths if str(p) in self.rejected_paths]):
            return f"an edit of {', '.join(again)} was rejected before"
        sensitive = [p for p in paths if is_sensitive(p, self.home)]
        if sensitive and kind in ACT_KINDS:
            return f"sensitive path: {', '.join(map(str, sensitive))}"
        if kind in WRITE_KINDS and self.mode in ("default",):
            return "edit"
        if kind == "execute" and self.mode in ("default", "accept_edits"):
            return "command"
        return None


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
