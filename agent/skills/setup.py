"""Give a session its skills and memory: tool state, and the prompt text they add."""

from __future__ import annotations

from pathlib import Path

from talaria.agent.config import Config
from talaria.agent.session import Session
from talaria.agent.skills.index import skills_section
from talaria.tools.memory_store import MemoryState, MemoryStore
from talaria.tools.skills.state import SkillsState
from talaria.tools.skills.store import SkillStore

MEMORY_HEADER = ("# Memory (frozen at session start; memory tool writes show next session)\n")


def skill_store(config: Config, project: Path | None = None) -> SkillStore:
    """The user's and the project's skills, or the skill set `config.skill_set` alone."""
    return SkillStore(config.home, project, config.project_skill_writes, root=config.skill_set)


def memory_store(config: Config) -> MemoryStore:
    return MemoryStore(config.home / "memories", {"memory": config.memory_chars,
                                                  "user": config.user_chars})


def attach(session: Session, config: Config, *, actor: str = "agent") -> None:
    """Set the session's skills and memory state (tools find them in `tool_state`)."""
    state = session.tool_state
    state.skills = SkillsState(skill_store(config, session.cwd), actor=actor,
                               review=config.self_improvement)
    state.memory = MemoryState(memory_store(config))


def prompt_sections(session: Session) -> str:
    """Skills index and memory snapshot for the system prompt ("" without either)."""
    state = session.tool_state
    parts = []
    if state.skills is not None and session.tool("skill_view") is not None:
        parts.append(skills_section(list(state.skills.store.scan().values()), session.context_window))
    memory = state.memory if session.tool("memory") is not None else None
    if memory is not None and (snapshot := memory.store.snapshot()):
        parts.append(MEMORY_HEADER + snapshot)
    return "\n\n".join(parts)
