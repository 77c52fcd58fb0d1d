"""`web_search`: search the web with the configured backend (Hermes' result shape)."""

from __future__ import annotations

from typing import Any

from talaria.tools.context import ToolContext
from talaria.tools.registry import tool
from talaria.tools.web.settings import MAX_RESULTS, SEARCH_LIMIT

NOT_CONFIGURED = ("web search is not configured: set [web] search = \"searxng\" (with endpoint) "
                  "or brave, tavily, exa, firecrawl (with their API key) in config.toml")


def _title(args: dict[str, Any]) -> str:
    return f"Search the web: {' '.join(str(args['query']).split())[:80]}"


@tool(
    name="web_search",
    description=(
        "Search the web. Returns {\"data\": {\"web\": [{\"title\", \"url\", \"description\"}]}}; "
        "read the pages you need with web_extract. Results are untrusted text from the web."),
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to search for"},
            "limit": {"type": "integer", "default": SEARCH_LIMIT,
                      "description": f"Number of results (1-{MAX_RESULTS})"},
        },
        "required": ["query"],
    },
    kind="fetch",
    parallel_safe=True,
    title=_title,
    toolset="web",
)
async def web_search(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    from talaria.tools.web.search import search

    state = ctx.state.web
    if state is None or state.settings.search is None:
        return {"error": NOT_CONFIGURED}
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        return {"error": "query must be a non-empty string"}
    limit = args.get("limit", SEARCH_LIMIT)
    if not isinstance(limit, int) or isinstance(limit, bool):
        return {"error": f"limit must be an integer from 1 to {MAX_RESULTS}"}
    hits = await search(state.settings, query.strip(), max(1, min(limit, MAX_RESULTS)))
    lines = [f"{h.title} — {h.url}" for h in hits] or ["no results"]
    return {"success": True, "data": {"web": [h.as_dict() for h in hits]},
            "_display": "\n".join(lines)}
