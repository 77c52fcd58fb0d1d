"""Skills as slash commands: `/NAME [task]` loads the skill into the turn, `/skills` lists them.

Door-neutral like `talaria.agent.commands` (whose built-in names win over a skill's): a front
door advertises `skill_commands(session)` next to the built-ins and passes a prompt through
`expand`, which returns the turn's content with the skill's instructions put in front.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from talaria.agent.session import Session
from talaria.tools.skills.store import versions

COMMAND_DESCRIPTION_MAX = 100
"""Characters of a skill's description shown in the editor's command menu."""
INVOKED_MAX = 30_000
"""Characters of a SKILL.md put into a turn by `/NAME`."""
INVOKED = """\
The user invoked the skill `{name}`. Follow its instructions (its files: skill_view with \
file_path).

<skill name="{name}" path="{path}">
{text}
</skill>
"""


def skill_commands(session: Session, reserved: Collection[str] = ()) -> list[dict[str, Any]]:
    """{name, description, hint} of every skill a user can invoke as `/NAME` (not the
    `reserved` names of built-in commands, which win)."""
    state = session.tool_state.skills
    if state is None:
        return []
    out = []
    for skill in sorted(state.store.scan().values(), key=lambda s: s.name):
        if skill.name in reserved:
            continue
        text = skill.description
        if len(text) > COMMAND_DESCRIPTION_MAX:
            text = text[: COMMAND_DESCRIPTION_MAX - 1] + "…"
        out.append({"name": skill.name, "description": text, "hint": "optional: what to do with it"})
    return out


def expand(session: Session, typed: str, content: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The turn's content for `/NAME task` when NAME is a skill (None otherwise): the skill's
    SKILL.md first, then the rest of the prompt with the command replaced by its task."""
    state = session.tool_state.skills
    stripped = typed.strip()
    if state is None or not stripped.startswith("/"):
        return None
    name, _, task = stripped[1:].partition(" ")
    skill = state.store.get(name)
    if skill is None:
        return None
    text = (skill.path / "SKILL.md").read_text(encoding="utf-8")
    if len(text) > INVOKED_MAX:  # a hand-written giant: the rest stays one skill_view away
        text = text[:INVOKED_MAX] + f"\n… ({len(text) - INVOKED_MAX:,} more characters: skill_view)"
    state.store.record(name, use=True)
    state.viewed[name] = max(versions(skill.path), default=0)  # it is read: patches may follow
    loaded = {"type": "text", "text": INVOKED.format(name=name, path=skill.path, text=text)}
    rest = [part for part in content if not (part.get("type") == "text" and part.get("text") == typed)]
    task_part = [{"type": "text", "text": task.strip() or f"Apply the skill `{name}` here."}]
    return [loaded, *rest, *task_part]


def listing(session: Session) -> str:
    """The `/skills` reply: each skill with its source and usage."""
    state = session.tool_state.skills
    if state is None:
        return "Skills are not available in this session."
    skills = sorted(state.store.scan().values(), key=lambda s: s.name)
    if not skills:
        return (f"No skills yet. Add one as {state.store.user_root}/NAME/SKILL.md, or let the agent "
                "save one after a hard-won success.")
    usage = state.store.usage()
    lines = [f"{len(skills)} skills (type /NAME to use one):"]
    for s in skills:
        used = usage.get(s.name, {}).get("uses", 0)
        where = s.source + (", shadows a user skill" if s.shadows else "")
        lines.append(f"- /{s.name} — {s.description[:80]} ({where}; used {used}×)")
    if state.store.problems:
        lines.append(f"{len(state.store.problems)} skill(s) could not be loaded: {state.store.problems[0]}")
    return "\n".join(lines)
