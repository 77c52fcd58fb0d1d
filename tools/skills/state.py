"""What a session keeps about skills: where they are, which it has read, who is writing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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
    provenance: dict[str, Any] | None = None
    """Where this session's writes were learned from ({run, task, attempt}: `talaria skills
    learn`), kept with each written skill (sets.note_provenance); None: a live session."""
    # The background review's bookkeeping (agent.skills.review), per session:
    review: bool = False
    """Whether the background review runs after turns (config, then the session's option)."""
    tool_calls_since_write: int = 0
    """Tool calls since the last skill write: the skill review's counter."""
    turns_since_memory: int = 0
    """User turns since the last memory write: the memory review's counter."""
    seen_writes: tuple[int, int] = (0, 0)
    """(skill writes, memory writes) when the counters were last brought up to date."""
    reviewing: bool = False
    """A review of this session is running (one at a time)."""

    def changed(self, text: str) -> None:
        self.changes.append(text)
        self.writes += 1
        if self.on_change is not None:
            self.on_change()
