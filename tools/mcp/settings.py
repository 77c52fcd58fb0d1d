"""Which MCP servers a session connects to, and every bound of the MCP client.

Servers come from two places, in one shape (`ServerSpec`):
- the editor: ACP `session/new` / `load` / `resume` carry `mcpServers` (`from_acp`): stdio
  `{name, command, args, env: [{name, value}]}`, or `{type: "http" | "sse", name, url,
  headers: [{name, value}]}`;
- `config.toml` (`from_config`), for headless and batch runs:

      [mcp_servers.github]
      command = "github-mcp-server"      # or: url = "https://..." (type = "sse" for SSE)
      args = ["stdio"]
      env = { GITHUB_TOKEN = "..." }     # or: headers = { Authorization = "Bearer ..." }
      allow = ["get_*", "search_*"]      # tools offered: globs over the server's tool names
      deny = ["delete_*"]                # never offered (deny wins)

A config table with only `allow` / `deny` filters the editor's server of that name.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from talaria.tools.mcp.schema import safe_name

START_TIMEOUT_S = 30.0
"""A server not ready (spawned, handshake done, tools listed) in this time is given up."""
CALL_TIMEOUT_S = 300.0
"""One tool call; then it is cancelled on the server and the call fails."""
STOP_GRACE_S = 0.5
"""After its stdin closes, how long a stdio server may take to exit before SIGKILL."""
BACKOFF_FIRST_S = 1.0
"""Wait before the first restart of a failed server; doubles each time."""
BACKOFF_MAX_S = 60.0
MAX_RESTARTS = 5
"""Restarts of a server in one session; then it stays down (the notice says so)."""
RESULT_CHARS = 50_000
"""Characters of a tool result returned inline; longer ones are cut head + tail and saved."""
MAX_TOOLS = 200
"""Tools taken from one server (each costs context at every model call)."""
STDERR_LINES = 20
"""Last lines of a stdio server's stderr kept, to say why it died."""
TRANSPORTS = ("stdio", "http", "sse")
INHERITED_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR")
"""What a stdio server inherits from our environment (plus what its entry sets): the MCP
SDK's own list, plus the locale. Model API keys stay with the agent."""


@dataclass(frozen=True, slots=True)
class ServerSpec:
    name: str
    transport: str
    """stdio, http (streamable HTTP) or sse."""
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    allow: tuple[str, ...] = ()
    """Globs over the server's tool names; empty: all."""
    deny: tuple[str, ...] = ()
    origin: str = "config"
    """editor or config: said in notices, so the user knows where to fix it."""

    def offers(self, tool: str) -> bool:
        if any(fnmatch.fnmatchcase(tool, g) for g in self.deny):
            return False
        return not self.allow or any(fnmatch.fnmatchcase(tool, g) for g in self.allow)


def _pairs(value: Any, what: str, where: str) -> dict[str, str]:
    """ACP's [{name, value}] lists, or a TOML table, as a dict of strings."""
    if value is None:
        return {}
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list) and all(isinstance(v, dict) for v in value):
        items = [(v.get("name"), v.get("value")) for v in value]
    else:
        raise ValueError(f"{where}: `{what}` must be a list of {{name, value}} or a table")
    if not all(isinstance(k, str) and k and isinstance(v, str) for k, v in items):
        raise ValueError(f"{where}: every `{what}` entry needs a non-empty name and a string value")
    return dict(items)


def _strings(value: Any, what: str, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where}: `{what}` must be a list of strings")
    return tuple(value)


def parse_server(entry: Any, *, origin: str, name: str | None = None) -> ServerSpec:
    """One server from an ACP `McpServer` or a config table; ValueError says what is wrong."""
    where = f"MCP server {name!r}" if name else "an mcpServers entry"
    if not isinstance(entry, dict):
        raise ValueError(f"{where} must be an object")
    name = name if name is not None else entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{where} needs a non-empty `name`")
    where = f"MCP server {name!r}"
    kind = entry.get("type") or ("stdio" if "command" in entry else "http" if "url" in entry else None)
    if kind not in TRANSPORTS:
        raise ValueError(f"{where}: give `command` (stdio) or `url` (with type http or sse)")
    spec = ServerSpec(name=name.strip(), transport=kind, origin=origin,
                      allow=_strings(entry.get("allow"), "allow", where),
                      deny=_strings(entry.get("deny"), "deny", where))
    if kind == "stdio":
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ValueError(f"{where}: `command` must be a non-empty string")
        return replace(spec, command=command, args=_strings(entry.get("args"), "args", where),
                       env=_pairs(entry.get("env"), "env", where))
    url = entry.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"{where}: `url` must be an http(s) URL")
    return replace(spec, url=url, headers=_pairs(entry.get("headers"), "headers", where))


def from_acp(entries: Any) -> list[ServerSpec]:
    """The servers of an ACP `mcpServers` list (null: none); ValueError for a bad entry."""
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ValueError("`mcpServers` must be a list")
    return [parse_server(e, origin="editor") for e in entries]


def from_config(tables: Mapping[str, Any]) -> tuple[list[ServerSpec], dict[str, tuple[tuple[str, ...], tuple[str, ...]]]]:
    """([servers], {name: (allow, deny)} for tables that only filter an editor's server)."""
    servers, filters = [], {}
    for name, table in tables.items():
        if isinstance(table, dict) and not ({"command", "url"} & table.keys()):
            where = f"[mcp_servers.{name}]"
            filters[name] = (_strings(table.get("allow"), "allow", where),
                             _strings(table.get("deny"), "deny", where))
            continue
        servers.append(parse_server(table, origin="config", name=name))
    return servers, filters


def combine(editor: Iterable[ServerSpec], config: Mapping[str, Any]) -> list[ServerSpec]:
    """The servers of a session: the editor's (with config filters applied), then config's.
    A name used twice (or two that differ only in characters tool names cannot carry) keeps
    both servers; the later one is renamed NAME_2, NAME_3..."""
    servers, filters = from_config(config)
    out: list[ServerSpec] = []
    taken: set[str] = set()
    for spec in [*editor, *servers]:
        if spec.name in filters and spec.origin == "editor":
            allow, deny = filters[spec.name]
            spec = replace(spec, allow=allow or spec.allow, deny=spec.deny + deny)
        name, n = spec.name, 1
        while safe_name(name, "server").lower() in taken:  # tool names use the safe form
            n += 1
            name = f"{spec.name}_{n}"
        taken.add(safe_name(name, "server").lower())
        out.append(replace(spec, name=name))
    return out
