"""execute_code's view of the tools, rendered from their `ToolSpec`s (never a hand-kept copy).

`module_source(specs)` is the `hermes_tools` module the kernel builds in memory: one function
per tool, returning the tool's result dict, plus the helpers `json_parse`, `shell_quote` and
`retry`. `describe(specs)` names the same functions in execute_code's description.
"""

from __future__ import annotations

import keyword
from typing import Any

from talaria.tools.registry import ToolSpec

PY_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool",
            "array": "list", "object": "dict"}
RESERVED = frozenset({"_call", "_args"})

HEADER = '''"""Talaria tools for execute_code scripts. Each function runs the tool through the agent
(same permission checks, same workspace) and returns the tool's result dict; failures are
dicts with an "error" key."""
from __future__ import annotations

import json as _json
import shlex as _shlex
import time as _time


def _args(**kwargs):
    return {k: v for k, v in kwargs.items() if v is not None}


def json_parse(text, default=...):
    """json.loads that tolerates control characters inside strings; returns `default`
    instead of raising when one is given."""
    try:
        return _json.loads(text, strict=False)
    except (TypeError, ValueError):
        if default is ...:
            raise
        return default


def shell_quote(value):
    """Quote a value for a shell command line (shlex.quote)."""
    return _shlex.quote(str(value))


def retry(fn, *args, attempts=3, delay=0.5, backoff=2.0, **kwargs):
    """Call fn(*args, **kwargs) until it neither raises nor returns an error dict (a refusal
    by the user is not retried); returns the last result or raises the last exception."""
    for attempt in range(1, attempts + 1):
        try:
            result = fn(*args, **kwargs)
        except Exception:
            if attempt == attempts:
                raise
        else:
            failed = isinstance(result, dict) and "error" in result and not result.get("rejected")
            if not failed or attempt == attempts:
                return result
        _time.sleep(delay * backoff ** (attempt - 1))


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise ImportError(
        "hermes_tools has no %r: scripts may call only %s" % (name, ", ".join(TOOLS))
        + (" (execute_code cannot call itself)" if name == "execute_code" else "")
    )
'''


def parameters(spec: ToolSpec) -> list[tuple[str, str, str | None]]:
    """(name, python type, default source or None when required): required ones first."""
    schema = spec.parameters
    required = list(schema.get("required", ()))
    out: list[tuple[str, str, str | None]] = []
    for name, prop in schema.get("properties", {}).items():
        if not name.isidentifier() or keyword.iskeyword(name) or name in RESERVED:
            raise ValueError(f"{spec.name}: parameter {name!r} cannot be a Python argument")
        kind = PY_TYPES.get(prop.get("type", ""), "object")
        default = None if name in required else repr(prop.get("default"))
        out.append((name, kind, default))
    return sorted(out, key=lambda p: p[2] is not None)  # stable: schema order within groups


def signature(spec: ToolSpec) -> str:
    params = ", ".join(
        f"{name}: {kind}" if default is None else f"{name}: {kind} = {default}"
        for name, kind, default in parameters(spec)
    )
    return f"{spec.name}({params}) -> dict"


def module_source(specs: list[ToolSpec]) -> str:
    """Python source of `hermes_tools`; the kernel supplies `_call(tool, args) -> dict`."""
    if any(not s.name.isidentifier() or keyword.iskeyword(s.name) for s in specs):
        raise ValueError("tool names must be Python identifiers")
    parts = [HEADER, f"TOOLS = {tuple(s.name for s in specs)!r}\n"]
    for spec in specs:
        names = [name for name, _, _ in parameters(spec)]
        doc = spec.text().replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
        call_args = ", ".join(f"{n}={n}" for n in names)
        parts.append(
            f"\n\ndef {signature(spec)}:\n"
            f'    """{doc}"""\n'
            f"    return _call({spec.name!r}, _args({call_args}))\n"
        )
    names = ["json_parse", "shell_quote", "retry", *(s.name for s in specs)]
    parts.append(f"\n\n__all__ = {names!r}\n")
    return "".join(parts)


def describe(specs: list[ToolSpec], limits: dict[str, Any]) -> str:
    """execute_code's description: when to use it, the functions, the limits. The functions
    are named, not spelled out: each is a tool the model has with its schema (listing their
    signatures again cost ~80 tokens on every request)."""
    names = ", ".join(s.name for s in specs)
    return (
        "Run a Python script that calls tools; only what it prints comes back to you. Use it "
        "for 3+ tool calls with logic in between, bulk work and loops (e.g. search, read the "
        f"hits, patch, test, print a summary). `from hermes_tools import {names}`: each takes "
        "the tool's arguments as keywords and returns its result dict (check "
        "r.get('error')); helpers: json_parse(text), shell_quote(s), retry(fn, *args, "
        "attempts=3). Variables persist between calls; reset=true starts fresh. Sandboxed, no "
        "network. Edit with write_file/patch so the user sees the diffs. "
        f"Limits: {limits['timeout']:g} s, {limits['tool_calls']} tool calls, stdout "
        f"{limits['stdout'] // 1000} KB inline (head and tail; the full output's path is "
        "returned: page it with read_file, do not re-run)."
    )
