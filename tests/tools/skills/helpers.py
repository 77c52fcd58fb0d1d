"""Builders for skill tests: SKILL.md text and a state on a temporary home."""

from __future__ import annotations

from pathlib import Path

from talaria.tools.skills.state import SkillsState
from talaria.tools.skills.store import SkillStore


def skill_md(name: str, description: str, body: str = "# Steps\n1. Do it.\n", **extra: str) -> str:
    lines = [f"name: {name}", f"description: {description}"] + [f"{k}: {v}" for k, v in extra.items()]
    return "---\n" + "\n".join(lines) + "\n---\n\n" + body


def state(home: Path, project: Path | None = None, *, actor: str = "agent",
          project_writes: bool = False) -> SkillsState:
    return SkillsState(SkillStore(home, project, project_writes), actor=actor)
