"""MCP results as tool results: what the model reads, capped, with what was cut saved.

A `CallToolResult`'s content blocks become one text (images and audio are described, not
inlined: a tool result cannot carry them to every provider), `isError` becomes the call's
`error`, and `structuredContent` is passed on when the server sent no text. Resource contents
(`resources/read`) get the same treatment.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
from pathlib import Path
from typing import Any

from talaria.tools.mcp.settings import RESULT_CHARS
from talaria.tools.web import spill

HEAD_SHARE = 0.6


def block_text(block: Any) -> str:
    """One content block as text."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return f"[{kind}: {block.mime_type}, {_decoded_size(block.data):,} bytes, not shown]"
    if kind == "resource":
        return resource_text(block.resource)
    if kind == "resource_link":
        name = getattr(block, "name", "") or ""
        return f"[resource link: {block.uri}" + (f" ({name})" if name else "") + "]"
    return f"[{kind or 'unknown'} content, not shown]"


def resource_text(contents: Any) -> str:
    if getattr(contents, "text", None) is not None:
        return str(contents.text)
    mime = getattr(contents, "mime_type", None) or "binary"
    return f"[{mime} resource {contents.uri}: {_decoded_size(getattr(contents, 'blob', '')):,} bytes, not shown]"


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def capped(text: str, cache_dir: Path) -> dict[str, Any]:
    """{"content": text} within RESULT_CHARS; a longer text is cut head + tail and saved."""
    shown, omitted = spill.head_tail(text, RESULT_CHARS, HEAD_SHARE)
    out: dict[str, Any] = {"content": shown}
    if omitted:
        out["omitted_chars"] = omitted
        with contextlib.suppress(OSError):  # the text is still shown, only not saved
            out["full_text_path"] = str(spill.save(text, cache_dir, ".txt"))
    return out


def tool_result(result: Any, cache_dir: Path) -> dict[str, Any]:
    """A `CallToolResult` as the tool call's result dict."""
    text = "\n\n".join(block_text(b) for b in result.content or ())
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False, indent=1, default=str)
    if result.is_error:
        return {"error": text.strip()[:RESULT_CHARS] or "the tool reported an error without details"}
    return capped(text, cache_dir)


def resource_result(result: Any, cache_dir: Path) -> dict[str, Any]:
    """A `ReadResourceResult` as a result dict."""
    return capped("\n\n".join(resource_text(c) for c in result.contents or ()), cache_dir)
