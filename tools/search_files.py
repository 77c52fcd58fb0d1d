"""`search_files`: regex over file contents or glob over file names (Hermes-compatible)."""

from __future__ import annotations

from typing import Any

from talaria.tools.context import ToolContext
from talaria.tools.paths import display, resolve
from talaria.tools.registry import tool

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
MAX_TEXT_CHARS = 300
"""A matching line is cut to this many characters."""


@tool(
    name="search_files",
    description=(
        "Regex over file contents (target='content') or glob over file names "
        "(target='files'). Skips hidden files, node_modules, binaries and secrets (.env, "
        "keys) unless `path` names one. Use instead of grep/find/ls."
    ),
    parameters={
        "type": "object",
        "properties": {
            "pattern": {"type": "string"},
            "target": {"type": "string", "enum": ["content", "files"], "default": "content"},
            "path": {"type": "string", "description": "Directory or file", "default": "."},
            "file_glob": {"type": "string", "description": "Only files matching, e.g. '*.py'"},
            "limit": {"type": "integer", "default": DEFAULT_LIMIT},
            "offset": {"type": "integer"},
        },
        "required": ["pattern"],
    },
    kind="search",
    parallel_safe=True,
    path_args=("path",),
    default_path=True,
    title=lambda a: f"Search {a['pattern']!r} in {a.get('path') or '.'}",
)
async def search_files(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    pattern = args.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        return {"error": "pattern must be a non-empty string"}
    target = args.get("target") or "content"
    raw = str(args.get("path") or ".")
    try:
        limit = min(max(1, int(args.get("limit") or DEFAULT_LIMIT)), MAX_LIMIT)
        offset = max(0, int(args.get("offset") or 0))
        root = resolve(raw, ctx.cwd)
        page = await ctx.workspace.search(
            pattern,
            root=root,
            target=target,
            file_glob=args.get("file_glob") or None,
            limit=limit,
            offset=offset,
        )
    except FileNotFoundError:
        return {"error": f"Path not found: {raw}"}
    except ValueError as exc:  # a malformed argument; workspace errors become results in the runner
        return {"error": str(exc)}
    matches: list[Any] = []
    concealed = 0
    shown_as: dict[str, str | None] = {}
    """A path's shown form, None if concealed: a page's matches are in a few files."""
    base = display(root, ctx.cwd)  # `display` of each match's path, by strings
    for m in page.matches:
        if m.path not in shown_as:
            concealed_path = ctx.conceal is not None and ctx.conceal(root / m.path)
            shown_as[m.path] = None if concealed_path else (
                base if m.path == "." else m.path if base == "." else f"{base}/{m.path}")
        shown = shown_as[m.path]  # a file root's own path is "."
        if shown is None:
            concealed += 1
            continue
        if target == "files":
            matches.append(shown)
        else:
            text = m.text or ""
            if len(text) > MAX_TEXT_CHARS:
                text = text[:MAX_TEXT_CHARS] + "..."
            matches.append({"path": shown, "line": m.line, "text": text})
    more = offset + len(page.matches) < page.total
    out: dict[str, Any] = {"matches": matches, "total": page.total}
    if not page.total_exact:  # the search stopped past this page: there are at least this many
        out["total_is_lower_bound"] = True
    out |= {"truncated": more, "next_offset": offset + len(page.matches) if more else None}
    if concealed:
        out["sensitive_skipped"] = concealed
        out["note"] = (f"{concealed} result(s) in sensitive files (keys, .env, credentials) were "
                       "left out; search or read such a file by its path to ask the user.")
    return out
