"""The memory files behind the `memory` tool: bounded notes that persist across sessions.

Two files under `$TALARIA_HOME/memories/`: `MEMORY.md` (the agent's notes on the environment,
conventions, lessons) and `USER.md` (the user's profile and preferences), entries separated by
a `§` line, each file capped in characters (`memory_chars`, `user_chars`). A frozen snapshot
enters the system prompt when a session starts (so the prompt cache holds); writes show from
the next session on, and the tool result says so.

A write that would pass the cap is refused with the current usage and the entries, so the
model can consolidate (Hermes silently dropped new entries). Exact duplicates, credentials and
injection are refused too. Every write is a locked read-modify-write with an atomic replace,
so two processes adding at once lose nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from talaria.tools.lockfile import locked, read_text, write_atomic
from talaria.tools.skills.guards import content_problem

SEPARATOR = "\n§\n"
FILES = {"memory": "MEMORY.md", "user": "USER.md"}
ACTIONS = ("add", "replace", "remove")
NEXT_SESSION = "Saved. It enters the system prompt from the next session on."


class MemoryRefused(ValueError):
    """A refused memory write; the message (and `details`) say what to do."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.details = details


@dataclass(slots=True)
class MemoryStore:
    root: Path
    """$TALARIA_HOME/memories."""
    caps: dict[str, int]
    """target -> character cap."""

    def path(self, target: str) -> Path:
        return self.root / FILES[target]

    def entries(self, target: str) -> list[str]:
        text = read_text(self.path(target)).strip()
        return [e.strip() for e in text.split(SEPARATOR.strip()) if e.strip()] if text else []

    def usage(self, target: str, entries: list[str] | None = None) -> str:
        entries = self.entries(target) if entries is None else entries
        return f"{len(_join(entries)):,}/{self.caps[target]:,} characters"

    def write(self, target: str, action: str, content: str | None, old_text: str | None) -> dict[str, Any]:
        """Apply one action under the file lock; raises MemoryRefused when refused."""
        if content is not None:
            content = content.strip()
            if problem := content_problem(content):
                raise MemoryRefused(problem)
        with locked(self.path(target)):
            entries = self.entries(target)
            if action == "add":
                if not content:
                    raise MemoryRefused("add needs content: one fact per entry")
                if _norm(content) in map(_norm, entries):
                    raise MemoryRefused("refused: this entry is already saved", entries=entries)
                new = [*entries, content]
            else:
                index = _find(entries, old_text)
                if action == "remove":
                    new = entries[:index] + entries[index + 1:]
                else:
                    if not content:
                        raise MemoryRefused("replace needs content (the new entry)")
                    new = entries[:index] + [content] + entries[index + 1:]
            text = _join(new)
            if len(text) > self.caps[target]:
                raise MemoryRefused(
                    f"refused: {FILES[target]} would hold {len(text):,} characters, over its cap "
                    f"of {self.caps[target]:,} (now {self.usage(target, entries)}). Nothing was "
                    "dropped. Consolidate: replace several entries with one shorter entry, or "
                    "remove what is stale, then add again.",
                    usage=self.usage(target, entries), entries=entries)
            write_atomic(self.path(target), text + "\n" if text else "")
        return {"success": True, "target": target, "usage": self.usage(target, new),
                "entries": len(new), "note": NEXT_SESSION}

    def snapshot(self) -> str:
        """The block for the system prompt, frozen when a session starts ("" when empty)."""
        parts = []
        for target, title in (("memory", "Your notes (memory)"), ("user", "About the user")):
            entries = self.entries(target)
            if entries:
                parts.append(f"## {title} [{self.usage(target, entries)}]\n" +
                             "\n".join(f"- {e}" for e in entries))
        return "\n\n".join(parts)


@dataclass(slots=True)
class MemoryState:
    store: MemoryStore
    writes: int = 0
    changes: list[str] = field(default_factory=list)


def _join(entries: list[str]) -> str:
    return SEPARATOR.join(entries)


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _find(entries: list[str], old_text: str | None) -> int:
    if not old_text or not old_text.strip():
        raise MemoryRefused("old_text is needed: a short unique part of the entry to change")
    hits = [i for i, e in enumerate(entries) if old_text.strip() in e]
    if not hits:
        raise MemoryRefused(f"no entry contains {old_text[:80]!r}", entries=entries)
    if len(hits) > 1:
        raise MemoryRefused(f"{len(hits)} entries contain {old_text[:80]!r}; quote more of the one "
                           "to change", entries=[entries[i] for i in hits])
    return hits[0]


