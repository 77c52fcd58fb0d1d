"""ACP prompt content blocks -> the agent's user message content."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from talaria.acp_server.jsonrpc import RpcError
from talaria.tools.workspace import Workspace, WorkspaceError

RESOURCE_TEXT_LIMIT = 200_000
"""Characters of one attached file passed to the model; the rest is cut with a note."""
MAX_CHARS_PER_TOKEN = 16
"""No real text averages more characters per token: a prompt longer than the context window
times this can never fit, and counting its tokens would stall the event loop for seconds
(tiktoken takes about 0.6 s per MB), so it is refused up front."""



def file_path(uri: str) -> Path | None:
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return Path(unquote(parsed.path))


def _attached(name: str, text: str) -> dict[str, Any]:
    if len(text) > RESOURCE_TEXT_LIMIT:
        text = text[:RESOURCE_TEXT_LIMIT] + f"\n[… cut at {RESOURCE_TEXT_LIMIT} characters]"
    return {"type": "text", "text": f'<file path="{name}">\n{text}\n</file>'}


async def user_content(blocks: Any, workspace: Workspace) -> list[dict[str, Any]]:
    """Text, resource links (file URIs read through the editor), embedded resources, images."""
    if not isinstance(blocks, list) or not blocks:
        raise RpcError.invalid_params("prompt must be a non-empty array of content blocks")
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise RpcError.invalid_params("each prompt block needs a string `type`")
        kind = block["type"]
        if kind == "text":
            if not isinstance(block.get("text"), str):
                raise RpcError.invalid_params("text blocks need a string `text`")
            parts.append({"type": "text", "text": block["text"]})
        elif kind == "image":
            if not isinstance(block.get("data"), str) or not isinstance(block.get("mimeType"), str):
                raise RpcError.invalid_params("image blocks need `data` and `mimeType`")
            parts.append({"type": "image", "mime_type": block["mimeType"], "data": block["data"]})
        elif kind == "resource_link":
            if not isinstance(block.get("uri"), str):
                raise RpcError.invalid_params("resource_link blocks need a string `uri`")
            parts.append(await _link(block, workspace))
        elif kind == "resource":
            resource = block.get("resource")
            if not isinstance(resource, dict) or not isinstance(resource.get("uri"), str):
                raise RpcError.invalid_params("resource blocks need a `resource` with a string `uri`")
            uri = resource["uri"]
            if isinstance(resource.get("text"), str):
                path = file_path(uri)
                parts.append(_attached(str(path) if path else uri, resource["text"]))
            else:
                parts.append({"type": "text", "text": f"[binary resource {uri} not shown]"})
        else:
            raise RpcError.invalid_params(f"unsupported prompt block type {kind!r}")
    return parts


async def _link(block: dict[str, Any], workspace: Workspace) -> dict[str, Any]:
    uri = block["uri"]
    path = file_path(uri)
    if path is None:
        return {"type": "text", "text": f"[link: {block.get('name') or uri} <{uri}>]"}
    try:
        return _attached(str(path), await workspace.read_text(path))
    except FileNotFoundError:
        return {"type": "text", "text": f"[attached file {path} does not exist]"}
    except (WorkspaceError, OSError) as exc:
        return {"type": "text", "text": f"[attached file {path} could not be read: {exc}]"}


def typed_text(blocks: list[dict[str, Any]]) -> str:
    """What the user typed: the last text block. Clients may put other text first
    (CodeCompanion prepends AGENTS.md), which must not hide a slash command."""
    return next((b["text"] for b in reversed(blocks) if b.get("type") == "text"), "")


def check_size(content: list[dict[str, Any]], context_window: int) -> None:
    """Refuse a prompt whose text cannot fit in `context_window` tokens (a -32602)."""
    chars = sum(len(part.get("text", "")) for part in content)
    limit = context_window * MAX_CHARS_PER_TOKEN
    if chars > limit:
        raise RpcError.invalid_params(
            f"the prompt is too large: {chars:,} characters, more than the model's context "
            f"window of {context_window:,} tokens can hold"
        )

