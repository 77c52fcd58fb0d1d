"""The keys of config.toml, checked: an unknown one (`max_turn = 5`, `[providers.x] base_ur`)
is named with the closest known key (issue 28). `load_config` warns about each on stderr, once
per process; `talaria config check` lists them and exits 2."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from talaria.tools.keys import unknown_key

TABLE_KEYS = ("providers", "environments", "mcp_servers", "web", "mcp", "prices")
"""Top-level tables besides the settings."""
PROVIDER_KEYS = ("base_url", "api_key_env", "api", "compat", "context_window", "vision")
"""What a `[providers.NAME]` table may set (agent/providers/factory.py, Config.window_for)."""
MCP_SERVER_KEYS = ("command", "args", "env", "url", "type", "headers", "allow", "deny")
"""What a `[mcp_servers.NAME]` table may set (talaria.tools.mcp.settings)."""

_warned: set[str] = set()


def problems(data: Mapping[str, Any], path: Path, settings: Iterable[str]) -> list[str]:
    """One line per unknown key of config.toml's `data` (its parsed tables), with its place."""
    known = [*settings, *TABLE_KEYS]
    out = [f"{path}: {unknown_key(key, known)}" for key in data if key not in known]
    for table, keys in (("providers", PROVIDER_KEYS), ("mcp_servers", MCP_SERVER_KEYS)):
        entries = data.get(table)
        if not isinstance(entries, Mapping):
            continue
        for name, entry in entries.items():
            if isinstance(entry, Mapping):
                out += [f"{path}: [{table}.{name}] {unknown_key(key, keys)}"
                        for key in entry if key not in keys]
    return out


def warn(lines: Iterable[str]) -> None:
    """Each problem once per process on stderr (never stdout: the protocol's in acp and lsp)."""
    for line in lines:
        if line not in _warned:
            _warned.add(line)
            print(f"talaria: warning: {line}; `talaria config check` lists every problem",
                  file=sys.stderr, flush=True)


def reported(lines: Iterable[str]) -> None:
    """Lines already shown another way (`talaria config check`): `warn` keeps quiet on them."""
    _warned.update(lines)
