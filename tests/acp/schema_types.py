"""The shallow types of ACP messages, read from the official schema (independent of `params`).

    fields("session/prompt", "request")   -> {"sessionId": Spec(...), "prompt": Spec(...), ...}
    fits(value, spec)                     -> whether `value` has the type the schema gives

A field's `Spec`: the JSON types it may have, for arrays the types of their items, integer
bounds (from `minimum` / `maximum` / `format`), whether it is required, whether the schema
marks it `x-deserialize-default-on-error`, and for objects the `Spec`s of their own fields.
Composite definitions (`allOf`, `anyOf`, `oneOf` of objects) are merged: a field is required
when every variant requires it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from tests.acpschema import methods, schema

FORMAT_BOUNDS = {"uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1), "int64": (-(2**63), 2**63 - 1),
                 "uint64": (0, 2**64 - 1)}


@dataclass
class Spec:
    types: set[str]
    items: set[str] | None = None
    low: int | None = None
    high: int | None = None
    required: bool = False
    lenient: bool = False
    fields: dict[str, Spec] = field(default_factory=dict)


def _defs(unstable: bool) -> dict[str, Any]:
    return schema(unstable)["$defs"]


def _deref(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = defs[node["$ref"].rsplit("/", 1)[-1]]
    return node


def _types(node: dict[str, Any], defs: dict[str, Any]) -> set[str]:
    node = _deref(node, defs)
    if "type" in node:
        kinds = node["type"]
        return set(kinds) if isinstance(kinds, list) else {kinds}
    found: set[str] = set()
    for key in ("anyOf", "oneOf"):
        for variant in node.get(key, []):
            found |= _types(variant, defs)
    for part in node.get("allOf", []):
        found |= _types(part, defs)
    return found or {"any"}


def _bounds(node: dict[str, Any], defs: dict[str, Any]) -> tuple[int | None, int | None]:
    node = _deref(node, defs)
    if "format" in node or "minimum" in node:
        low, high = FORMAT_BOUNDS.get(node.get("format", ""), (None, None))
        return node.get("minimum", low), node.get("maximum", high)
    for part in [*node.get("allOf", []), *node.get("anyOf", [])]:
        if (found := _bounds(part, defs)) != (None, None):
            return found
    return None, None


def _items(node: dict[str, Any], defs: dict[str, Any]) -> set[str] | None:
    node = _deref(node, defs)
    for part in [node, *node.get("allOf", []), *node.get("anyOf", [])]:
        part = _deref(part, defs)
        if "items" in part:
            return _types(part["items"], defs)
    return None


def _object_fields(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Spec]:
    """The fields of an object definition, its allOf parts and anyOf/oneOf variants merged."""
    node = _deref(node, defs)
    out: dict[str, Spec] = {}
    required = set(node.get("required", []))
    for name, prop in node.get("properties", {}).items():
        out[name] = _spec(prop, defs)
    for part in node.get("allOf", []):
        for name, spec in _object_fields(part, defs).items():
            out.setdefault(name, spec)
            required |= {name} if spec.required else set()
    variants = [_object_fields(v, defs) for v in node.get("anyOf", []) + node.get("oneOf", [])]
    variants = [v for v in variants if v]
    for variant in variants:
        for name, spec in variant.items():
            if name in out:
                out[name].types |= spec.types
            else:
                out[name] = Spec(set(spec.types), spec.items, spec.low, spec.high,
                                 lenient=spec.lenient, fields=spec.fields)
    if variants:
        required |= set.intersection(*[{n for n, s in v.items() if s.required} for v in variants])
    for name, spec in out.items():
        spec.required = name in required
    return out


def _spec(prop: dict[str, Any], defs: dict[str, Any]) -> Spec:
    low, high = _bounds(prop, defs)
    types = _types(prop, defs)
    if prop.get("x-deserialize-default-on-null"):  # null reads as the default
        types = types | {"null"}
    nested: dict[str, Spec] = {}
    if "object" in types:
        for variant in [prop, *prop.get("anyOf", []), *prop.get("allOf", [])]:
            if "null" not in _types(variant, defs) or "object" in _types(variant, defs):
                nested = nested or _object_fields(variant, defs)
    return Spec(types, _items(prop, defs), low, high,
                lenient=bool(prop.get("x-deserialize-default-on-error")), fields=nested)


@functools.cache
def _where(method: str) -> tuple[str, bool]:
    """The side of `method` in methods-derived.json and whether only the unstable schema has it."""
    for unstable in (False, True):
        for side, table in methods(unstable).items():
            if method in table:
                return side, unstable
    raise KeyError(method)


def fields(method: str, kind: str) -> dict[str, Spec]:
    """`kind`: "request", "notification" (its params) or "response" (its result)."""
    side, unstable = _where(method)
    defs = _defs(unstable)
    name = methods(unstable)[side][method][kind]
    return _object_fields(defs[name], defs)


def params_kind(method: str) -> str:
    side, unstable = _where(method)
    return "request" if "request" in methods(unstable)[side][method] else "notification"


def type_of(value: Any) -> set[str]:
    if value is None:
        return {"null"}
    if isinstance(value, bool):
        return {"boolean"}
    if isinstance(value, int):
        return {"integer", "number"}
    if isinstance(value, float):
        return {"number"}
    if isinstance(value, str):
        return {"string"}
    return {"array"} if isinstance(value, list) else {"object"}


def fits(value: Any, spec: Spec) -> bool:
    """Whether `value` has the field's type (top level, and array items' own types)."""
    if "any" in spec.types:
        return True
    if not type_of(value) & spec.types:
        return False
    if isinstance(value, int) and not isinstance(value, bool) and spec.low is not None \
            and not spec.low <= value <= (spec.high if spec.high is not None else value):
        return False
    if isinstance(value, list) and spec.items is not None and "any" not in spec.items:
        return all(type_of(item) & spec.items for item in value)
    return True
