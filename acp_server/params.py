"""Checking what the editor sends: each failure says which field is wrong.

The types of every ACP method's params, and of the answers the agent gets to its own requests,
are tables here (`PARAMS`, `RESULTS`), written from the official ACP v1 schema
(`tests/acp/test_params_shapes.py` holds them to it). The peer checks every incoming message
against them (`ACP_CHECKS`) before a handler sees it:

    a request with a wrong-typed field        -32602 "`sessionId` must be a string, not an array"
    a notification with one                   dropped, one warning line (never answered)
    an answer to our request with one         RpcError (-32603, "Malformed response: ...")
                                              raised where the request was made
    a field the schema marks                  treated as absent (the schema's
      `x-deserialize-default-on-error`        `x-deserialize-default-on-error`): a bad `_meta`
                                              does not fail a request

Only the types are checked here, to the depth the tables give; what the values mean (an
existing cwd, a known mode) is the handlers' business (`cwd_param`, `param`, ...).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from talaria.acp_server import wire
from talaria.acp_server.wire import Checks, RpcError

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


def dirs_param(params: dict[str, Any], cwd: Path) -> tuple[Path, ...]:
    """The `additionalDirectories` of session/new, load, resume or fork (absent: none), each
    an absolute path to a readable directory; -32602 naming the first that is not."""
    from talaria.tools.paths import additional_dirs

    try:
        return additional_dirs(cwd, params.get("additionalDirectories") or [])
    except ValueError as exc:
        raise RpcError.invalid_params(f"`additionalDirectories`: {exc}") from None


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


# -- the types of the schema ------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Kind:
    """A JSON type of the ACP schema: its name in error messages, its test, the schema `type`s
    it stands for, and for arrays the kind of their items, for objects the fields checked."""

    name: str
    test: Callable[[Any], bool]
    types: frozenset[str]
    items: Kind | None = None
    fields: dict[str, Field] | None = None


@dataclass(frozen=True, slots=True)
class Field:
    kind: Kind
    required: bool = False
    lenient: bool = False
    """The schema's `x-deserialize-default-on-error`: a wrong value counts as absent."""


def _integer(low: int, high: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


STRING = Kind("a string", lambda v: isinstance(v, str), frozenset({"string"}))
BOOLEAN = Kind("a boolean", lambda v: isinstance(v, bool), frozenset({"boolean"}))
UINT16 = Kind("an integer from 0 to 65535", _integer(0, 2**16 - 1), frozenset({"integer"}))
UINT32 = Kind("an integer from 0 to 4294967295", _integer(0, 2**32 - 1), frozenset({"integer"}))
OBJECT = Kind("an object", lambda v: isinstance(v, dict), frozenset({"object"}))
REQUEST_ID = Kind("a string, a 64-bit integer or null", wire.valid_id,
                  frozenset({"string", "integer", "null"}))
CONFIG_VALUE = Kind("a string or a boolean", lambda v: isinstance(v, str | bool),
                    frozenset({"string", "boolean"}))


def nullable(kind: Kind) -> Kind:
    return replace(kind, name=f"{kind.name} or null", test=lambda v: v is None or kind.test(v),
                   types=kind.types | {"null"})


def array_of(item: Kind) -> Kind:
    plural = item.name.replace("a string", "strings").replace("an object", "objects")
    return Kind(f"an array of {plural}", lambda v: isinstance(v, list), frozenset({"array"}), item)


def object_with(**fields: Field) -> Kind:
    return replace(OBJECT, fields=fields)


def req(kind: Kind) -> Field:
    return Field(kind, required=True)


def opt(kind: Kind) -> Field:
    return Field(kind)


META = Field(nullable(OBJECT), lenient=True)
SESSION = {"sessionId": req(STRING), "_meta": META}
# The schema's `x-deserialize-default-on-null`: null is the default (none), as the SDKs read it.
OPENING = {"cwd": req(STRING), "additionalDirectories": opt(nullable(array_of(STRING))),
           # Required by the schema, optional here: clients that omit it mean "none".
           "mcpServers": opt(nullable(array_of(OBJECT))), "_meta": META}

PARAMS: dict[str, dict[str, Field]] = {
    "initialize": {"protocolVersion": req(UINT16),
                   "clientCapabilities": Field(OBJECT, lenient=True),
                   "clientInfo": Field(nullable(OBJECT), lenient=True), "_meta": META},
    "authenticate": {"methodId": req(STRING), "_meta": META},
    "logout": {"_meta": META},
    "session/new": OPENING,
    "session/load": {**SESSION, **OPENING},
    "session/resume": {**SESSION, **OPENING},
    "session/fork": {**SESSION, **OPENING, "systemPrompt": opt(nullable(OBJECT))},  # unstable
    "session/list": {"cwd": opt(nullable(STRING)), "cursor": opt(nullable(STRING)), "_meta": META},
    "session/close": SESSION,
    "session/delete": SESSION,
    "session/prompt": {**SESSION, "prompt": req(array_of(OBJECT))},
    "session/set_mode": {**SESSION, "modeId": req(STRING)},
    "session/set_config_option": {**SESSION, "configId": req(STRING),
                                  "value": req(CONFIG_VALUE), "type": opt(STRING)},
    "session/cancel": SESSION,
    "$/cancel_request": {"requestId": req(REQUEST_ID), "_meta": META},
}
"""Method -> the types of its params (requests and notifications the agent handles)."""

_EXIT_CODE = Field(nullable(UINT32), lenient=True)
_SIGNAL = Field(nullable(STRING), lenient=True)
RESULTS: dict[str, dict[str, Field]] = {
    "fs/read_text_file": {"content": req(STRING), "_meta": META},
    "fs/write_text_file": {"_meta": META},
    "terminal/create": {"terminalId": req(STRING), "_meta": META},
    "terminal/output": {"output": req(STRING),
                        # Required by the schema, optional here: a missing one means false.
                        "truncated": opt(BOOLEAN),
                        "exitStatus": Field(nullable(object_with(
                            exitCode=_EXIT_CODE, signal=_SIGNAL, _meta=META)), lenient=True),
                        "_meta": META},
    "terminal/wait_for_exit": {"exitCode": _EXIT_CODE, "signal": _SIGNAL, "_meta": META},
    "terminal/kill": {"_meta": META},
    "terminal/release": {"_meta": META},
    "session/request_permission": {
        "outcome": req(object_with(outcome=req(STRING), optionId=opt(STRING), _meta=META)),
        "_meta": META},
    "elicitation/create": {"action": req(STRING), "content": opt(nullable(OBJECT)),
                           "_meta": META},
}
"""Method -> the types of the editor's answer (the requests the agent makes)."""


def described(value: Any) -> str:
    """What a wrong value is, for messages ("... not an array", "... not null")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number" if isinstance(value, float) or abs(value) < 2**53 else "a huge number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def checked(value: dict[str, Any], fields: dict[str, Field], path: str = "") -> dict[str, Any]:
    """`value` with lenient fields of a wrong type removed; ValueError naming the first field
    that is missing or of a wrong type (`prompt[2]`, `outcome.optionId`)."""
    out = dict(value)
    for name, field in fields.items():
        where = f"{path}{name}"
        if name not in value:
            if field.required:
                raise ValueError(f"`{where}` is required")
            continue
        try:
            out[name] = _checked_value(value[name], field.kind, where)
        except ValueError:
            if not field.lenient:
                raise
            del out[name]
    return out


def _checked_value(value: Any, kind: Kind, where: str) -> Any:
    if not kind.test(value):
        raise ValueError(f"`{where}` must be {kind.name}, not {described(value)}")
    if kind.items is not None and value is not None:
        bad = next((i for i, item in enumerate(value) if not kind.items.test(item)), None)
        if bad is not None:
            raise ValueError(f"`{where}[{bad}]` must be {kind.items.name}, "
                             f"not {described(value[bad])}")
    if kind.fields is not None and isinstance(value, dict):
        return checked(value, kind.fields, f"{where}.")
    return value


def check_params(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """`params` fit for `method`'s handler, or -32602 naming the wrong field."""
    fields = PARAMS.get(method)
    if fields is None:
        return params
    try:
        return checked(params, fields)
    except ValueError as exc:
        raise RpcError.invalid_params(str(exc)) from None


def check_result(method: str, result: Any) -> Any:
    """The editor's answer to our `method` request, or RpcError saying what is malformed.
    A null answer stands for `{}` where nothing is required (CodeCompanion's writes)."""
    fields = RESULTS.get(method)
    if fields is None:
        return result
    if result is None and not any(f.required for f in fields.values()):
        return {}
    if not isinstance(result, dict):
        raise RpcError.malformed_answer(f"the result must be an object, not {described(result)}")
    try:
        return checked(result, fields)
    except ValueError as exc:
        raise RpcError.malformed_answer(str(exc)) from None


ACP_CHECKS = Checks(params=check_params, result=check_result)


class ClientInfo:
    """What the client said of itself in `initialize` (its `clientCapabilities`)."""

    def __init__(self) -> None:
        self.capabilities: dict[str, Any] = {"fs": {}}

    def has(self, group: str, name: str) -> bool:
        caps = self.capabilities.get(group)
        return isinstance(caps, dict) and caps.get(name) is not None

    @property
    def compaction(self) -> bool:
        """The client advertised `session.compaction` (ACP compaction updates)."""
        return self.has("session", "compaction")
