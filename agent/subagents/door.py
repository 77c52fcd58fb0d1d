"""`ChildDoor`: a subagent's front door, which forwards to the user's session's door.

The subagent's work shows as one tool card in the parent session (`card`): each of its tool
calls is a line that turns from `…` to `✓` or `✗` as the call ends, and its notices are lines
too. Its text, plan, usage and title stay inside it (the parent's plan and context meter must
not change under the user). Permission questions go to the user on that card with the
subagent's name in the title. A subagent's own subagents get their cards from the root door,
so each is a card of its own in the editor.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from talaria.agent import events as ev
from talaria.agent.door import FrontDoor
from talaria.agent.permissions import WRITE_KINDS, PermissionAsk
from talaria.tools.handoffs import Clarifier
from talaria.tools.workspace import Workspace

PROGRESS_LINES = 40
"""Lines kept on a subagent's card (the latest; earlier ones are counted)."""
LINE_CHARS = 160


class ChildDoor:
    def __init__(self, root: FrontDoor, card: str, name: str, cwd: Path) -> None:
        self.root = root
        """The user's session's door (a subagent's subagent shares it)."""
        self.card = card
        self.name = name
        self.cwd = cwd
        self.lines: list[str] = []
        self.tool_counts: Counter[str] = Counter()
        self.files: dict[str, None] = {}
        """Paths this subagent's edits changed, in order (relative to the project)."""
        self._calls: dict[str, tuple[int, ev.ToolCallStarted]] = {}

    @property
    def workspace(self) -> Workspace:
        return self.root.workspace

    clarifier: Clarifier | None = None
    """A subagent asks the user nothing of its own (its parent may)."""

    async def emit(self, event: ev.Event) -> None:
        match event:
            case ev.ToolCallStarted(id=call_id, title=title):
                self._calls[call_id] = (len(self.lines), event)
                self.lines.append(_line("…", title))
            case ev.ToolCallFinished(id=call_id, status=status, result=result):
                self._finished(call_id, status, result)
            case ev.Notice(text=text):
                self.lines.append(_line("!", text))
            case ev.Compacted(applied=True):
                before, after = event.figures()
                self.lines.append(_line("!", f"context compacted: {before} -> {after} tokens"))
            case _:
                return  # text, plan, usage, title: the subagent's own, not the user's session
        await self.root.emit(ev.ToolCallUpdated(self.card, content=(self.progress(),)))

    def _finished(self, call_id: str, status: str, result: dict[str, Any]) -> None:
        index, started = self._calls.pop(call_id, (None, None))
        if started is None or index is None:
            return
        self.tool_counts[started.name] += 1
        error = result.get("error") if status == "failed" else None
        mark = "✓" if status == "completed" else "✗"
        self.lines[index] = _line(mark, started.title + (f" — {error}" if error else ""))
        if status == "completed" and started.kind in WRITE_KINDS:
            for location in started.locations:
                self.files[_relative(location, self.cwd)] = None

    def progress(self) -> dict[str, Any]:
        """The card's content: the latest lines of progress."""
        shown = self.lines[-PROGRESS_LINES:]
        head = [f"… {len(self.lines) - len(shown)} earlier lines"] if len(shown) < len(self.lines) else []
        return {"type": "text", "text": "\n".join(head + shown)}

    async def ask(self, ask: PermissionAsk) -> str:
        # The subagent's own call has no card in the editor: the question is asked on the
        # subagent's card, which the editor knows.
        return await self.root.ask(replace(ask, tool_call_id=self.card, title=f"{self.name}: {ask.title}"))


def _line(mark: str, text: str) -> str:
    flat = " ".join(text.split())
    return f"{mark} {flat[:LINE_CHARS - 1] + '…' if len(flat) > LINE_CHARS else flat}"


def _relative(path: str, cwd: Path) -> str:
    try:
        return str(Path(path).relative_to(cwd))
    except ValueError:
        return path
