"""The `ToolSpec`s of a session's MCP servers, built when a server is ready.

Each server tool is `mcp__SERVER__TOOL` (schema sanitized, see schema.py), of the kind its
annotations give (`mcp_kind`): `read` only when the server says `readOnlyHint` (and not
`destructiveHint`), `fetch` when it also says `openWorldHint`, else `other`, asked about like
any tool in the session's mode (`allow always` remembers the tool).
Servers with resources add two tools, `mcp_list_resources` and `mcp_read_resource`.
"""

from __future__ import annotations

import keyword
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from talaria.tools.mcp.schema import description, sanitize, tool_name
from talaria.tools.registry import ToolSpec

if TYPE_CHECKING:
    from talaria.tools.mcp.connection import Connection

Call = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]
"""(server, tool, arguments) -> result dict: the manager's `call_tool`."""


def server_specs(conn: Connection, call: Call) -> list[ToolSpec]:
    """The offered tools of a ready server (its allow / deny lists applied)."""
    server = conn.spec.name
    specs: list[ToolSpec] = []
    names: set[str] = set()
    for tool in conn.listing.tools:
        if not conn.spec.offers(tool.name):
            continue
        name, n = tool_name(server, tool.name), 1
        while name in names:  # two tool names that differ only in characters we drop
            n += 1
            name = f"{tool_name(server, tool.name)[:60]}_{n}"
        names.add(name)
        schema = sanitize(tool.input_schema)
        hints = tool.annotations
        label = f"{server}: {(hints.title if hints and hints.title else None) or tool.title or tool.name}"
        specs.append(ToolSpec(
            name=name, description=description(server, tool.description, schema.problems),
            parameters=schema.parameters, handler=_handler(call, server, tool.name, schema.renames),
            kind=(kind := mcp_kind(hints)), parallel_safe=kind == "read",
            title=_label(label), toolset=f"mcp:{server}",
        ))
    return specs


def mcp_kind(hints: Any) -> str:
    """A server tool's kind from its annotations (`mcp.types.ToolAnnotations` or None). Only a
    tool that says it is read-only is a read; one that also says it is destructive is not
    (the claims contradict: the safer holds), and one that reaches an open world is a fetch.
    Hints the server leaves out are not assumed."""
    if hints is None or hints.read_only_hint is not True or hints.destructive_hint is True:
        return "other"
    return "fetch" if hints.open_world_hint is True else "read"


def _label(label: str) -> Callable[[dict[str, Any]], str]:
    return lambda args: label


def _handler(call: Call, server: str, tool: str, renames: dict[str, str]) -> Any:
    async def handler(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return await call(server, tool, {renames.get(k, k): v for k, v in args.items()})

    return handler


def scriptable(spec: ToolSpec) -> bool:
    """Whether execute_code's stubs can give this tool a Python signature."""
    props = spec.parameters.get("properties", {})
    return all(p.isidentifier() and not keyword.iskeyword(p) and not p.startswith("_")
               for p in props)


def resource_specs(list_resources: Callable[[str | None], Awaitable[dict[str, Any]]],
                   read_resource: Callable[[str, str], Awaitable[dict[str, Any]]]) -> list[ToolSpec]:
    async def list_handler(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        server = args.get("server")
        return await list_resources(server if isinstance(server, str) and server else None)

    async def read_handler(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        server, uri = args.get("server"), args.get("uri")
        if not isinstance(server, str) or not isinstance(uri, str):
            return {"error": "server and uri must be strings (see mcp_list_resources)"}
        return await read_resource(server, uri)

    return [
        ToolSpec(
            name="mcp_list_resources",
            description="List the resources (files, records, documents) MCP servers offer: "
                        "[{server, uri, name, description, mime_type}]. Read one with "
                        "mcp_read_resource.",
            parameters={"type": "object", "properties": {
                "server": {"type": "string", "description": "Only this server's (optional)"}}},
            handler=list_handler, kind="read", parallel_safe=True,
            title=lambda args: "List MCP resources", toolset="mcp",
        ),
        ToolSpec(
            name="mcp_read_resource",
            description="Read one MCP resource by its server and uri (from mcp_list_resources).",
            parameters={"type": "object", "properties": {
                "server": {"type": "string"}, "uri": {"type": "string"}},
                "required": ["server", "uri"]},
            handler=read_handler, kind="read", parallel_safe=True,
            title=lambda args: f"Read {args.get('uri', 'an MCP resource')}", toolset="mcp",
        ),
    ]
