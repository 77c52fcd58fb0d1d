"""`talaria config` (the effective configuration and where each value came from) and
`talaria config check` (every problem of config.toml at once; exit 2 when there is one)."""

from __future__ import annotations

import argparse
import sys

from talaria.acp_server.cli import exits


def add_parser(sub: argparse._SubParsersAction) -> None:
    config = sub.add_parser(
        "config", help="print the effective configuration and its sources; `check` checks it",
        description="Print every setting's effective value and its source (flag, env, "
        "config.toml, credentials, default).\n`talaria config check` lists every problem of "
        "$TALARIA_HOME/config.toml (unknown keys with\nthe closest known one, bad values, "
        "environment, provider and MCP server tables) and exits 2\nwhen there is one.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    config.add_argument("action", nargs="?", choices=("check",),
                        help="check: list config.toml's problems (exit 2 when there are any)")


def run(args: argparse.Namespace) -> int:
    return check() if args.action == "check" else show()


def show() -> int:
    from talaria.agent.config import describe, load_config

    try:
        config = load_config()
    except ValueError as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return exits.USAGE
    rows = describe(config)
    width = max(len(name) for name, _, _ in rows)
    for name, value, source in rows:
        print(f"{name:<{width}}  {value or '-'}  ({source})")
    return exits.DONE


def check() -> int:
    from talaria.agent import config_keys
    from talaria.agent.config import FIELD_NAMES, load_config, read_config_file, talaria_home

    path = talaria_home() / "config.toml"
    try:
        found = config_keys.problems(read_config_file(path), path, FIELD_NAMES)
    except ValueError as exc:  # not TOML
        found = [str(exc)]
    config_keys.reported(found)  # said below, not again as load_config's warnings
    try:
        found += _tables(load_config())
    except ValueError as exc:
        found.append(str(exc))
    for line in dict.fromkeys(found):
        print(f"talaria: {line}", file=sys.stderr)
    if found:
        print(f"talaria: {len(dict.fromkeys(found))} problem(s) in the configuration", file=sys.stderr)
        return exits.USAGE
    print(f"{path}: ok" if path.exists() else f"{path}: none (every setting at its default or "
          "from the environment): ok")
    return exits.DONE


def _tables(config: object) -> list[str]:
    """What only building things would find: each environment and MCP server table, and the
    provider of every configured model."""
    from talaria.agent.config import Config
    from talaria.agent.providers.factory import BUILTIN_ENDPOINTS, split_model
    from talaria.tools.environments.spec import resolve
    from talaria.tools.errors import EnvError
    from talaria.tools.keys import closest
    from talaria.tools.mcp.settings import from_config

    assert isinstance(config, Config)
    out = []
    for name in config.environments:
        try:
            resolve(name, config.environments)
        except EnvError as exc:
            out.append(str(exc))
    try:
        from_config(config.mcp_servers)
    except ValueError as exc:
        out.append(f"[mcp_servers] {exc}")
    known = ["openai", "anthropic", "replay", *BUILTIN_ENDPOINTS, *config.providers]
    for setting, model in [("model", config.model), *(("fallback_models", m) for m in config.fallback_models)]:
        prefix = split_model(model)[0] if model else None
        if prefix is not None and prefix not in known:
            guess = closest(prefix, known)
            meant = f" (did you mean {guess!r}?)" if guess else ""
            out.append(f"{setting} {model!r}: unknown provider {prefix!r}{meant}; use one of "
                       f"{', '.join(known)} or add a [providers.{prefix}] table")
    return out
