"""`session_search` (Hermes-compatible): full-text search over past sessions, and scrolling
inside one. The store belongs to the agent, so the runtime hands the search in as
`ctx.state.recall` (agent/recall.py); a run without a store does not offer the tool.

Recall is a read: with scope="all" a call reads other projects' sessions, so its planned
paths hold the store (`ctx.state.recall_reach`) and the permission policy judges it as a read
outside the project (it asks, or is refused in dont_ask), whichever route the call takes."""

from __future__ import annotations

from typing import Any

import anyio

from talaria.tools.context import ToolContext
from talaria.tools.registry import tool


@tool(
    name="session_search",
    description=(
        "Search this project's past sessions: query (all words; \"phrase\", "
        "OR, NOT, prefix*) -> sessions with a snippet and the messages around it; session_id + "
        "around_message_id (+ window) scrolls there; scope=\"all\": every project."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "default": 3},
            "sort": {"type": "string", "enum": ["newest", "oldest"]},
            "session_id": {"type": "string"},
            "around_message_id": {"type": "integer"},
            "window": {"type": "integer", "default": 5},
            "role_filter": {"type": "string"},
            "scope": {"type": "string", "enum": ["project", "all"]},
        },
    },
    kind="search",
    parallel_safe=True,
    title=lambda a: _title(a),
    call_paths=lambda args, state: state.recall_reach(args) if state.recall_reach else (),
)
async def session_search(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    recall = ctx.state.recall
    if recall is None:
        return {"error": "no session store in this run: past sessions cannot be searched"}
    try:
        return await anyio.to_thread.run_sync(recall, args)
    except ValueError as exc:  # RecallError: what to pass instead
        return {"error": str(exc)}


def _title(args: dict[str, Any]) -> str:
    where = "past sessions of all projects" if args.get("scope") == "all" else "past sessions"
    return f"Search {where}: {args['query']}" if args.get("query") else where.capitalize()
