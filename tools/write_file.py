"""`write_file`: replace a whole file, keeping its line endings and mode (Hermes-compatible)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from talaria.tools.context import ToolContext
from talaria.tools.paths import display, resolve
from talaria.tools.registry import tool
from talaria.tools.workspace import WorkspaceError


def newline_of(text: str) -> str:
    """The file's dominant line ending: `\\r\\n` when most of its newlines are CRLF."""
    crlf = text.count("\r\n")
    return "\r\n" if crlf and crlf * 2 >= text.count("\n") else "\n"


def with_newline(text: str, newline: str) -> str:
    """`text` with every line ending made `newline`."""
    text = text.replace("\r\n", "\n")
    return text.replace("\n", newline) if newline != "\n" else text


async def read_existing(ctx: ToolContext, path: Any) -> tuple[bool, str | None]:
    """(exists, text): text is None for a missing file, or one that is not readable text."""
    try:
        return True, await ctx.workspace.read_text(path)
    except FileNotFoundError:
        return False, None
    except WorkspaceError:
        return True, None


async def _planned(args: dict[str, Any], ctx: ToolContext) -> tuple[Path, bool, str | None, str]:
    """(path, exists, old text, new text): the write, computed and not made. `content` keeps
    the existing file's line endings. Raises WorkspaceError, OSError, ValueError."""
    content = args["content"]
    path = resolve(str(args.get("path") or ""), ctx.cwd)
    exists, old = await read_existing(ctx, path)
    if old is not None and "\n" in content:
        content = with_newline(content, newline_of(old))
    return path, exists, old, content


async def preview_write(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any] | None:
    """The diff this call would make (old_text None for a new file), or None when unknown."""
    if not isinstance(args.get("content"), str):
        return None
    try:
        path, exists, old, content = await _planned(args, ctx)
    except (WorkspaceError, OSError, ValueError):
        return None
    if exists and old is None:  # not readable text (binary, too large): no honest diff
        return None
    return {"path": str(path), "old_text": old, "new_text": content}


@tool(
    name="write_file",
    description=(
        "Write a whole file, replacing its content; creates parent dirs. Use patch for "
        "targeted edits."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "content": {"type": "string", "description": "Complete new content"},
        },
        "required": ["path", "content"],
    },
    kind="edit",
    path_args=("path",),
    title=lambda a: f"Write {a['path']}",
    preview=preview_write,
)
async def write_file(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    if not isinstance(args.get("content"), str):
        return {"error": "content must be a string"}
    try:
        path, exists, old, content = await _planned(args, ctx)
        await ctx.workspace.write_text(path, content)
    except ValueError as exc:  # a malformed argument; workspace errors become results in the runner
        return {"error": str(exc)}
    return {
        "path": display(path, ctx.cwd),
        "bytes_written": len(content.encode("utf-8")),
        "created": not exists,
        "_diff": {"path": str(path), "old_text": old, "new_text": content},
    }
