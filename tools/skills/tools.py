"""`skills_list`, `skill_view`, `skill_manage`: Hermes' names and arguments.

Progressive disclosure: the system prompt lists only `name: description`; `skill_view` loads a
skill's instructions (and its file list) when the model decides it applies, and a supporting
file only when asked for by `file_path`.
"""

from __future__ import annotations

from typing import Any

from talaria.tools.context import ToolContext
from talaria.tools.registry import NOTES, tool
from talaria.tools.skills.format import SUPPORT_DIRS
from talaria.tools.skills.manage import ACTIONS, manage
from talaria.tools.skills.state import SkillsState
from talaria.tools.skills.store import HISTORY, SkillError, versions

VIEW_FILE_MAX = 100_000
"""Characters of a file skill_view returns (the rest is counted, not sent)."""
NOT_SET_UP = {"error": "skills are not available in this session"}


def _state(ctx: ToolContext) -> SkillsState | None:
    return ctx.state.skills


@tool(
    name="skills_list",
    description="List the installed skills (name, description, category). Use skill_view(name) "
                "to load one before following it.",
    parameters={"type": "object", "properties": {
        "category": {"type": "string"}}},
    kind="read",
    parallel_safe=True,
    title=lambda a: "List skills" + (f" in {a['category']}" if a.get("category") else ""),
    toolset="skills",
)
async def skills_list(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    state = _state(ctx)
    if state is None:
        return NOT_SET_UP
    category = args.get("category")
    skills = [s for s in state.store.scan().values() if not category or s.category == category]
    return {"skills": [
        {"name": s.name, "description": s.description, "category": s.category, "source": s.source}
        | ({"shadows": s.shadows} if s.shadows else {})
        for s in sorted(skills, key=lambda s: s.name)
    ], "count": len(skills)} | ({"not_loaded": state.store.problems} if state.store.problems else {})


@tool(
    name="skill_view",
    description="Load a skill's instructions (SKILL.md) and the list of its files; with "
                "file_path, one supporting file (e.g. references/api.md).",
    parameters={"type": "object", "properties": {
        "name": {"type": "string"},
        "file_path": {"type": "string"},
    }, "required": ["name"]},
    kind="read",
    parallel_safe=True,
    title=lambda a: f"View skill {a['name']}" + (f" ({a['file_path']})" if a.get("file_path") else ""),
    toolset="skills",
)
async def skill_view(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    state = _state(ctx)
    if state is None:
        return NOT_SET_UP
    try:
        skill = state.store.require(str(args.get("name")))
    except SkillError as exc:
        return {"error": str(exc)}
    file_path = args.get("file_path")
    relative = str(file_path) if file_path else "SKILL.md"
    target = (skill.path / relative).resolve()
    if skill.path.resolve() not in target.parents or HISTORY in target.parts:
        return {"error": f"file_path {relative!r} is not inside the skill folder"}
    try:
        text = target.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return {"error": f"cannot read {relative} of {skill.name}: {exc}"}
    state.store.record(skill.name, view=True, use=not file_path)
    if not file_path:
        state.viewed[skill.name] = max(versions(skill.path), default=0)
    result: dict[str, Any] = {"name": skill.name, "file": relative, "content": text[:VIEW_FILE_MAX]}
    if len(text) > VIEW_FILE_MAX:
        result["truncated"] = f"{len(text) - VIEW_FILE_MAX} more characters"
    if not file_path:
        result["files"] = files(skill.path)
        result["source"] = skill.source
        if skill.shadows:
            result["shadows"] = skill.shadows
        if not skill.writable:
            result["read_only"] = True
    return result


def files(folder: Any) -> list[str]:
    """Supporting files of a skill, relative to its folder."""
    found = []
    for sub in SUPPORT_DIRS:
        found += [p.relative_to(folder).as_posix() for p in sorted((folder / sub).rglob("*"))
                  if p.is_file()]
    return found


@tool(
    name="skill_manage",
    description=(
        "A skill (Agent Skills format) to create or change. create, edit: content = the whole "
        "SKILL.md (--- name, description ---, body); patch: old_string, new_string; "
        "write_file, remove_file: file_path in references/, templates/, scripts/ or assets/; "
        "delete: archive it (absorbed_into: what took it over)."
    ),
    parameters={"type": "object", "properties": {
        "action": {"type": "string", "enum": list(ACTIONS)},
        "name": {"type": "string", "description": "lowercase-hyphenated, e.g. fix-flaky-pytest"},
        "content": {"type": "string"},
        "old_string": {"type": "string"},
        "new_string": {"type": "string"},
        "replace_all": {"type": "boolean"},
        "category": {"type": "string"},
        "file_path": {"type": "string"},
        "file_content": {"type": "string"},
        "absorbed_into": {"type": "string"},
    }, "required": ["action", "name"]},
    kind="think",
    kind_of=lambda a: NOTES,  # every action writes the agent's own files ($TALARIA_HOME)
    title=lambda a: f"{str(a['action']).replace('_', ' ').capitalize()} skill {a['name']}",
    toolset="skills",
)
async def skill_manage(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    state = _state(ctx)
    if state is None:
        return NOT_SET_UP
    return manage(state, args, ctx.session_id)
