"""`read_file`: a page of a text file as numbered `N|text` lines (Hermes-compatible)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from talaria.tools.context import ToolContext
from talaria.tools.paths import display, resolve
from talaria.tools.registry import tool
from talaria.tools.workspace import WorkspaceError

DEFAULT_LIMIT = 500
MAX_LIMIT = 2000
MAX_LINE_CHARS = 2000
MAX_PAGE_CHARS = 100_000
"""A page stops early (with `next_offset`) once its content passes this many characters."""
SIMILAR_SCAN = 2000
"""How many file names near a missing path are compared for 'did you mean'."""
SIMILAR_TIMEOUT_S = 2.0


def split_lines(text: str) -> list[str]:
    """Lines of `text` without terminators (`\\r\\n` or `\\n`); no phantom line after a final
    newline. Unlike str.splitlines, form feeds and U+2028 do not start new lines."""
    if not text:
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return [ln.removesuffix("\r") for ln in lines]


def _int(args: dict[str, Any], key: str, default: int) -> int:
    value = args.get(key)
    return default if value is None or value == "" else int(value)


async def similar_files(ctx: ToolContext, path: Path) -> list[str]:
    """Up to 3 existing files whose names look like `path`'s, nearest directory first."""
    found: list[Any] = []
    with anyio.move_on_after(SIMILAR_TIMEOUT_S):  # a hint must not stall on a huge directory
        try:
            found = (await ctx.workspace.search(
                "*", root=path.parent, target="files", limit=SIMILAR_SCAN
            )).matches
        except (OSError, WorkspaceError, ValueError):
            return []
    rels = sorted((m.path for m in found), key=lambda r: r.count("/"))
    names = [r.rsplit("/", 1)[-1] for r in rels]
    import difflib  # for a path that is not there: not at start

    close = difflib.get_close_matches(path.name, names, n=3, cutoff=0.6)
    picks = [next(r for r, n in zip(rels, names, strict=True) if n == c) for c in close]
    return [display(path.parent / r, ctx.cwd) for r in picks]


@tool(
    name="read_file",
    description=(
        "Read a text file as numbered lines 'N|text'. Page large files with offset/limit. "
        "Use instead of cat/head/tail."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path (absolute, relative or ~)"},
            "offset": {"type": "integer", "description": "First line, 1-based"},
            "limit": {
                "type": "integer",
                "description": f"Max lines (max {MAX_LIMIT})",
                "default": DEFAULT_LIMIT,
            },
        },
        "required": ["path"],
    },
    kind="read",
    parallel_safe=True,
    path_args=("path",),
    title=lambda a: f"Read {a['path']}",
)
async def read_file(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    raw = str(args.get("path") or "")
    try:
        offset = max(1, _int(args, "offset", 1))
        limit = min(max(1, _int(args, "limit", DEFAULT_LIMIT)), MAX_LIMIT)
        path = resolve(raw, ctx.cwd)
        text = await ctx.workspace.read_text(path)
    except FileNotFoundError:
        result: dict[str, Any] = {"error": f"File not found: {raw}"}
        if raw and (similar := await similar_files(ctx, resolve(raw, ctx.cwd))):
            result["similar"] = similar
        return result
    except ValueError as exc:  # a malformed argument; workspace errors become results in the runner
        return {"error": str(exc)}
    lines = split_lines(text)
    total = len(lines)
    if offset > max(total, 1):
        return {"error": f"offset {offset} is past the end of the file ({total} lines)"}
    out: list[str] = []
    size = 0
    for number in range(offset, min(offset + limit, total + 1)):
        line = lines[number - 1]
        if len(line) > MAX_LINE_CHARS:
            line = f"{line[:MAX_LINE_CHARS]}... [line cut: {len(line):,} chars]"
        entry = f"{number}|{line}"
        if out and size + len(entry) > MAX_PAGE_CHARS:
            break
        out.append(entry)
        size += len(entry) + 1
    last = offset - 1 + len(out)  # number of the last line shown
    more = last < total
    return {
        "path": display(path, ctx.cwd),
        "content": "\n".join(out),
        "total_lines": total,
        "truncated": more,
        "next_offset": last + 1 if more else None,
    }
