"""`memory`: bounded notes that persist across sessions (Hermes-compatible). The files, caps
and refusals are in `talaria.tools.memory_store`."""

from __future__ import annotations

from typing import Any

from talaria.tools.context import ToolContext
from talaria.tools.memory_store import ACTIONS, FILES, MemoryRefused
from talaria.tools.registry import NOTES, tool


@tool(
    name="memory",
    description=(
        "Notes kept across sessions. target=memory: yours (environment, conventions, "
        "lessons); target=user: the user's preferences. add (content), replace (old_text: a "
        "unique part of an entry, content), remove (old_text). Keep entries short; "
        "consolidate when full."
    ),
    parameters={"type": "object", "properties": {
        "action": {"type": "string", "enum": list(ACTIONS)},
        "target": {"type": "string", "enum": list(FILES)},
        "content": {"type": "string"},
        "old_text": {"type": "string"},
    }, "required": ["action", "target"]},
    kind="think",
    kind_of=lambda a: NOTES,  # every action writes the agent's own files ($TALARIA_HOME)
    title=lambda a: f"{str(a['action']).capitalize()} {'user profile' if a['target'] == 'user' else 'memory'}",
    toolset="memory",
)
async def memory(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    state = ctx.state.memory
    if state is None:
        return {"error": "memory is not available in this session"}
    action, target = args.get("action"), args.get("target")
    if action not in ACTIONS:
        return {"error": f"action must be one of {', '.join(ACTIONS)}, got {action!r}"}
    if target not in FILES:
        return {"error": f"target must be memory or user, got {target!r}"}
    content, old_text = args.get("content"), args.get("old_text")
    if content is not None and not isinstance(content, str) or \
            old_text is not None and not isinstance(old_text, str):
        return {"error": "content and old_text must be strings"}
    try:
        result = state.store.write(target, action, content, old_text)
    except MemoryRefused as exc:
        return {"error": str(exc), **exc.details}
    state.writes += 1
    state.changes.append("Updated user profile" if target == "user" else "Updated memory")
    return result
