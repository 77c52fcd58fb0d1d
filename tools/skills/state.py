"""What a session keeps about skills: where they are, which it has read, who is writing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from talaria.tools.skills.store import SkillStore


@dataclass(slots=True)
class SkillsState:
    store: SkillStore
    actor: str = "agent"
    """Who writes, for provenance: agent (the session's model), review (the background review)."""
    viewed: dict[str, int] = field(default_factory=dict)
    """Skill name -> the version this session read: patch/edit need a current read."""
    changes: list[str] = field(default_factory=list)
    """What writes did, for the user ("Saved skill `x`"); the front door takes them."""
    writes: int = 0
    """Successful skill_manage calls in this session."""
    on_change: Callable[[], None] | None = None
    """Called after every change (refreshes the editor's slash commands)."""

    def changed(self, text: str) -> None:
        self.changes.append(text)
        self.writes += 1
        if self.on_change is not None:
            self.on_change()
