"""MCP tool names and input schemas made acceptable to OpenAI and Anthropic.

A server may send anything as a tool's `inputSchema`: JSON Schema of any draft, `$ref`s into
`$defs`, a top-level `anyOf`, arrays without `items`, property names with spaces, a schema of
megabytes, or not a schema at all. Both providers reject a whole request for one bad tool
(OpenAI: "Invalid schema for function"; Anthropic: property keys must match
`^[a-zA-Z0-9_.-]{1,64}$`), so every schema is rewritten before it is offered:

- the top level is always `{"type": "object", "properties": {...}}`: `allOf` branches are
  merged, `anyOf` / `oneOf` branches give their properties (none required);
- local `$ref`s are inlined (at most REF_DEPTH deep; a cycle becomes `{}`), `$defs` dropped;
- an array gets `items`, a boolean schema becomes `{}`, unknown `type`s are dropped;
- property names outside the allowed characters are renamed (`Schema.renames` maps them
  back when the tool is called);
- schemas deeper than MAX_DEPTH, or larger than MAX_SCHEMA_CHARS, are replaced by a
  permissive object and the tool's description says so.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

NAME_CHARS = re.compile(r"[^A-Za-z0-9_]+")
PROPERTY_KEY = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")
MAX_NAME = 64
"""Tool names: OpenAI allows 64 characters."""
MAX_DEPTH = 12
REF_DEPTH = 3
"""A recursive `$ref` is inlined this many times along one path, then left open."""
MAX_SCHEMA_CHARS = 32_768
"""A tool's schema, as JSON, beyond which it is replaced (it would cost every model call)."""
MAX_DESCRIPTION = 2_048
"""A tool's description, in characters."""
MAX_FIELD_DESCRIPTION = 1_024
TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})
DROPPED = frozenset({"$schema", "$id", "$defs", "definitions", "$comment", "$anchor",
                     "$dynamicAnchor", "$dynamicRef", "$vocabulary", "$ref"})
SUBSCHEMA_MAPS = ("properties", "patternProperties")
SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
SUBSCHEMAS = ("items", "additionalProperties", "not", "contains", "if", "then", "else")
PERMISSIVE: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": True}


def safe_name(text: str, fallback: str = "x") -> str:
    """`text` with runs of characters other than [A-Za-z0-9_] as one `_` (a Python
    identifier's alphabet, so scripts can call the tool by this name)."""
    return NAME_CHARS.sub("_", text).strip("_") or fallback


def tool_name(server: str, tool: str) -> str:
    """`mcp__SERVER__TOOL`, at most MAX_NAME characters (a hash keeps long ones distinct)."""
    name = f"mcp__{safe_name(server, 'server')}__{safe_name(tool, 'tool')}"
    if len(name) > MAX_NAME:
        import hashlib  # only for a name too long; not on `initialize`'s path

        digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
        name = f"{name[:MAX_NAME - 9]}_{digest}"
    return name


@dataclass(slots=True)
class Schema:
    parameters: dict[str, Any]
    """The schema offered to the model."""
    renames: dict[str, str] = field(default_factory=dict)
    """Offered property name -> the server's, for names that had to change."""
    problems: list[str] = field(default_factory=list)
    """What was changed that the model should know (said in the tool's description)."""


def sanitize(raw: Any) -> Schema:
    """The offered schema for a tool whose server sent `raw` as its inputSchema."""
    out = Schema(dict(PERMISSIVE))
    if not isinstance(raw, dict):
        out.problems.append("the server sent no usable input schema: pass the arguments its "
                            "description names")
        return out
    try:
        size = len(json.dumps(raw))
    except (TypeError, ValueError):
        size = MAX_SCHEMA_CHARS + 1
    if size > MAX_SCHEMA_CHARS:
        out.problems.append(f"its input schema was too large to send ({size:,} characters): pass "
                            "the arguments its description names")
        return out
    defs = {**_table(raw.get("definitions")), **_table(raw.get("$defs"))}
    root = _flatten_top(_clean(raw, defs, 0, 0))
    properties = root.get("properties", {})
    renamed: dict[str, Any] = {}
    for key, value in properties.items():
        new = key if PROPERTY_KEY.match(key) else _free_key(safe_name(key, "arg")[:60], renamed)
        if new != key:
            out.renames[new] = key
        renamed[new] = value
    back = {old: new for new, old in out.renames.items()}
    required = [back.get(r, r) for r in root.get("required", ()) if r in properties]
    params: dict[str, Any] = {"type": "object", "properties": renamed}
    if required:
        params["required"] = required
    for key in ("description", "additionalProperties"):
        if key in root:
            params[key] = root[key]
    out.parameters = params
    return out


def _free_key(base: str, taken: dict[str, Any]) -> str:
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    return name


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _clean(node: Any, defs: dict[str, Any], depth: int, refs: int) -> dict[str, Any]:
    """One subschema, cleaned (see the module docstring)."""
    if not isinstance(node, dict) or depth > MAX_DEPTH:
        return {}  # booleans, junk, too deep: anything goes
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = _resolve(ref, defs)
        if target is None or refs >= REF_DEPTH:
            return {"description": _text(node.get("description"))} if node.get("description") else {}
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _clean(merged, defs, depth, refs + 1)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in DROPPED or key.startswith("x-"):
            continue
        if key in SUBSCHEMA_MAPS:
            if isinstance(value, dict):
                out[key] = {str(k): _clean(v, defs, depth + 1, refs) for k, v in value.items()}
        elif key in SUBSCHEMA_LISTS:
            if isinstance(value, list) and value:
                out[key] = [_clean(v, defs, depth + 1, refs) for v in value]
        elif key in SUBSCHEMAS:
            if key == "additionalProperties" and isinstance(value, bool):
                out[key] = value
            elif key == "items" and isinstance(value, list):  # draft-04 tuples
                out[key] = {}
            else:
                out[key] = _clean(value, defs, depth + 1, refs)
        elif key == "type":
            kept = _types(value)
            if kept is not None:
                out[key] = kept
        elif key == "required":
            if isinstance(value, list):
                out[key] = [v for v in value if isinstance(v, str)]
        elif key == "enum":
            if isinstance(value, list) and value:
                out[key] = value
        elif key in ("description", "title"):
            if isinstance(value, str):
                out[key] = _text(value)
        else:
            out[key] = value
    if "items" not in out and (out.get("type") == "array" or
                               isinstance(out.get("type"), list) and "array" in out["type"]):
        out["items"] = {}
    if "required" in out and isinstance(out.get("properties"), dict):
        out["required"] = [r for r in out["required"] if r in out["properties"]] or None
        if out["required"] is None:
            del out["required"]
    return out


def _resolve(ref: str, defs: dict[str, Any]) -> dict[str, Any] | None:
    for prefix in ("#/$defs/", "#/definitions/"):
        if ref.startswith(prefix):
            target = defs.get(ref[len(prefix):])
            return target if isinstance(target, dict) else None
    return None


def _types(value: Any) -> str | list[str] | None:
    if isinstance(value, str):
        return value if value in TYPES else None
    if isinstance(value, list):
        kept = [v for v in value if isinstance(v, str) and v in TYPES]
        return kept or None
    return None


def _text(value: Any, limit: int = MAX_FIELD_DESCRIPTION) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _flatten_top(root: dict[str, Any]) -> dict[str, Any]:
    """The top level as one object: `allOf` merged, `anyOf`/`oneOf` properties unioned."""
    properties = dict(root.get("properties") or {})
    required = list(root.get("required") or ())
    for branch in root.get("allOf") or ():
        properties.update(branch.get("properties") or {})
        required += branch.get("required") or []
    for key in ("anyOf", "oneOf"):
        for branch in root.get(key) or ():
            for name, prop in (branch.get("properties") or {}).items():
                properties.setdefault(name, prop)
    flat = {"type": "object", "properties": properties,
            "required": [r for r in dict.fromkeys(required) if r in properties]}
    if isinstance(root.get("description"), str):
        flat["description"] = root["description"]
    if "additionalProperties" in root:
        flat["additionalProperties"] = root["additionalProperties"]
    return flat


def description(server: str, text: Any, problems: list[str]) -> str:
    """What the model reads about an MCP tool: its server, its own text, what was changed."""
    body = _text(text, MAX_DESCRIPTION) if isinstance(text, str) and text.strip() else "(no description)"
    notes = "".join(f" Note: {p}." for p in problems)
    return f"[MCP server {server}] {body}{notes}"
