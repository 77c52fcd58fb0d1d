"""Checking ACP request params: each failure is a -32602 that says which field is wrong."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from talaria.acp_server.jsonrpc import RpcError

MAX_QUOTED_CHARS = 120
"""Longest client value quoted back in an error message (the whole of it goes in `data`)."""


def quoted(value: str) -> str:
    """`value` as it appears in an error message: repr, cut to MAX_QUOTED_CHARS."""
    text = repr(value)
    return text if len(text) <= MAX_QUOTED_CHARS else text[: MAX_QUOTED_CHARS - 3] + "..."


def param(params: dict[str, Any], name: str, kind: type = str) -> Any:
    value = params.get(name)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise RpcError.invalid_params(f"`{name}` must be a {kind.__name__}")
    return value


def cwd_param(params: dict[str, Any]) -> Path:
    raw = param(params, "cwd")
    if "\x00" in raw:  # Path.is_dir would raise ValueError: a -32603 instead of a -32602
        raise RpcError.invalid_params("`cwd` contains a NUL character")
    cwd = Path(raw)
    if not cwd.is_absolute():
        raise RpcError.invalid_params("`cwd` must be an absolute path")
    try:
        cwd.stat()
    except FileNotFoundError:
        raise RpcError.resource_not_found(f"cwd {quoted(raw)} does not exist", cwd=raw) from None
    except OSError as exc:  # permission denied on a parent, a loop of symlinks...
        raise RpcError.invalid_params(f"cwd {quoted(raw)} cannot be used: {exc.strerror}") from None
    if not cwd.is_dir():
        raise RpcError.invalid_params(f"cwd {quoted(raw)} is not a directory")
    if not os.access(cwd, os.R_OK | os.X_OK):
        raise RpcError.invalid_params(f"cwd {quoted(raw)} cannot be read (permission denied)")
    return cwd


def mcp_servers_param(params: dict[str, Any]) -> list[Any]:
    """The `mcpServers` of session/new, load or resume as `ServerSpec`s (absent or null: none)."""
    from talaria.tools.mcp.settings import from_acp

    try:
        return from_acp(params.get("mcpServers"))
    except ValueError as exc:
        raise RpcError.invalid_params(f"`mcpServers`: {exc}") from None


def parse_cursor(cursor: str) -> tuple[float, str]:
    """`updated_at/id` of the last session of the previous page (see Store.list_sessions)."""
    stamp, _, session_id = cursor.partition("/")
    try:
        updated_at = float(stamp)
    except ValueError:
        updated_at = math.nan
    if not session_id or not math.isfinite(updated_at):
        raise RpcError.invalid_params("`cursor` is not one this agent issued")
    return updated_at, session_id
