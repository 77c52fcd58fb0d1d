"""`todo`: the session's task list (Hermes-compatible), shown in the editor as the ACP plan.

The list lives in `ctx.state.todos`. ACP plan entries know only pending / in_progress /
completed, so cancelled items are left out of the plan (showing them as completed would claim
work that was not done); they stay in the list the model sees.
"""

from __future__ import annotations

from typing import Any

from talaria.tools.context import ToolContext
from talaria.tools.registry import tool

STATUSES = ("pending", "in_progress", "completed", "cancelled")
MAX_ITEMS = 100
MAX_CONTENT_CHARS = 1000


def _check(item: Any, old: dict[str, str] | None) -> dict[str, str]:
    """A clean {id, content, status}; merged over `old` when the id already exists."""
    if not isinstance(item, dict) or not str(item.get("id", "")).strip():
        raise ValueError(f"each todo needs an id: {item!r}"[:200])
    status = str(item.get("status") or (old or {}).get("status") or "pending").strip().lower()
    if status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}, not {status!r}")
    content = str(item.get("content") or (old or {}).get("content") or "").strip()
    if not content:
        raise ValueError(f"todo {item['id']!r} needs content")
    return {"id": str(item["id"]).strip(), "content": content[:MAX_CONTENT_CHARS], "status": status}


def plan_entries(todos: list[dict[str, str]]) -> list[dict[str, str]]:
    """ACP plan entries for a todo list (cancelled items dropped)."""
    return [
        {"content": t["content"], "priority": "medium", "status": t["status"]}
        for t in todos
        if t["status"] != "cancelled"
    ]


@tool(
    name="todo",
    description=(
        "A task list for multi-step work. Without todos: returns the list. merge=false "
        "replaces it; merge=true updates items by id, appends new ones."
    ),
    parameters={
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "content": {"type": "string"},
                        "status": {"type": "string", "enum": list(STATUSES)},
                    },
                    "required": ["id"],
                },
            },
            "merge": {"type": "boolean"},
        },
    },
    kind="think",
    title=lambda a: "Update plan" if a.get("todos") is not None else "Read plan",
)
async def todo(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    current = ctx.state.todos
    items = args.get("todos")
    if items is None:
        return {"todos": [dict(t) for t in current]}
    if not isinstance(items, list):
        return {"error": "todos must be a list of {id, content, status} objects"}
    try:
        if args.get("merge"):
            merged = {t["id"]: t for t in current}
            for item in items:
                key = str(item.get("id", "")).strip() if isinstance(item, dict) else ""
                merged[key] = _check(item, merged.get(key))
            new = list(merged.values())
        else:
            fresh: dict[str, dict[str, str]] = {}
            for item in items:
                checked = _check(item, None)
                fresh[checked["id"]] = checked
            new = list(fresh.values())
    except ValueError as exc:
        return {"error": str(exc)}
    if len(new) > MAX_ITEMS:
        return {"error": f"at most {MAX_ITEMS} todos"}
    ctx.state.todos = new
    if ctx.report is not None:
        await ctx.report({"plan": plan_entries(new)})
    return {"todos": [dict(t) for t in new]}
