"""Hold ACP messages to the official ACP v1 JSON schema (vendored in `tests/acp_schema/`).

The schema's top level does not bind a method to its params, so each message is checked against
the `$defs` entry for its method (from `methods-derived.json`): a request's `params`, a
response's `result` (the method comes from the request it answers), a notification's `params`,
an error response's `error`. A `session/update` is first checked against the one `SessionUpdate`
variant its `sessionUpdate` names, so a bad `tool_call` says what is wrong with the tool call.

    rec = Recorder()
    rec.record("client->agent", line)  # raises SchemaViolation with a readable reason
    rec.record("agent->client", line)
    assert not rec.unanswered()
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SCHEMA_DIR = Path(__file__).parent / "acp_schema"
SCHEMA_URI = "urn:acp:v1:schema"

Direction = Literal["agent->client", "client->agent"]
AGENT_TO_CLIENT: Direction = "agent->client"
CLIENT_TO_AGENT: Direction = "client->agent"
# x-side in the schema names the side that *handles* a method.
_HANDLER_SIDE = {AGENT_TO_CLIENT: "client", CLIENT_TO_AGENT: "agent"}
_OPPOSITE: dict[str, Direction] = {
    AGENT_TO_CLIENT: CLIENT_TO_AGENT,
    CLIENT_TO_AGENT: AGENT_TO_CLIENT,
}
MAX_MESSAGE_CHARS = 300


class SchemaViolation(AssertionError):
    """A message that the official ACP schema (or JSON-RPC 2.0) rejects."""


@functools.cache
def schema(unstable: bool = False) -> dict[str, Any]:
    """The stable schema, or (`unstable`) the one with the unstable methods and updates
    (`session/fork`, `subagent_update`), for tests of features behind unstable capabilities."""
    name = "schema.unstable.json" if unstable else "schema.json"
    return json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))


@functools.cache
def _registry(unstable: bool = False) -> Registry:
    resource = Resource.from_contents(schema(unstable), default_specification=DRAFT202012)
    return Registry().with_resource(SCHEMA_URI, resource)


@functools.cache
def methods(unstable: bool = False) -> dict[str, dict[str, dict[str, str]]]:
    """side ("agent", "client", "protocol") -> method -> {"request"|"response"|"notification": def}."""
    derived = json.loads((SCHEMA_DIR / "methods-derived.json").read_text(encoding="utf-8"))
    return derived["unstable" if unstable else "stable"]


@functools.cache
def _validator(pointer: str, unstable: bool = False) -> Draft202012Validator:
    return Draft202012Validator({"$ref": f"{SCHEMA_URI}#{pointer}"}, registry=_registry(unstable))


@functools.cache
def session_update_kinds(unstable: bool = False) -> dict[str, int]:
    """`sessionUpdate` value -> index of its variant in `$defs/SessionUpdate/oneOf`."""
    variants = schema(unstable)["$defs"]["SessionUpdate"]["oneOf"]
    return {v["properties"]["sessionUpdate"]["const"]: i for i, v in enumerate(variants)}


def schema_errors(definition: str, instance: Any, *, where: str = "",
                  unstable: bool = False) -> list[str]:
    """Readable problems of `instance` against `$defs/<definition>` (or a `/`-pointer); [] if valid."""
    pointer = definition if definition.startswith("/") else f"/$defs/{definition}"
    errors = sorted(_validator(pointer, unstable).iter_errors(instance),
                    key=lambda e: list(e.absolute_path))
    return [_describe(e, where) for e in errors]


def check(definition: str, instance: Any, *, where: str = "", name: str | None = None,
          unstable: bool = False) -> None:
    """Raise `SchemaViolation` unless `instance` is valid against `$defs/<definition>`."""
    if problems := schema_errors(definition, instance, where=where, unstable=unstable):
        header = f"{where or definition} is not a valid {name or definition}:"
        raise SchemaViolation("\n  ".join([header, *problems]))


def method_defs(method: str, direction: Direction, unstable: bool = False) -> dict[str, str] | None:
    """The `$defs` names for `method` sent in `direction`, or None if that side has no such method."""
    table = methods(unstable)
    return table[_HANDLER_SIDE[direction]].get(method) or table["protocol"].get(method)


def validate_message(
    msg: Any,
    direction: Direction,
    pending: Mapping[Any, str] | None = None,
    *,
    allow_unknown_methods: bool = False,
    unstable: bool = False,
) -> str:
    """Check one JSON-RPC message; return its kind: "request", "notification", "result", "error".

    `pending` maps the ids of requests sent the *other* way to their methods, so that a result
    can be checked against its method's response definition. Methods starting with `_` are
    extensions: only the envelope is checked.
    """
    if not isinstance(msg, dict):
        raise SchemaViolation(f"a message must be a JSON object, got {_short(msg)}")
    if msg.get("jsonrpc") != "2.0":
        raise SchemaViolation(f'jsonrpc must be "2.0": {_short(msg)}')
    if "id" in msg:
        check("RequestId", msg["id"], where="id", unstable=unstable)
    if "method" in msg:
        return _validate_call(msg, direction, allow_unknown_methods, unstable)
    if ("result" in msg) == ("error" in msg) or "id" not in msg:
        raise SchemaViolation(
            f"a response needs an id and exactly one of result/error: {_short(msg)}"
        )
    if "error" in msg:
        check("Error", msg["error"], where="error", unstable=unstable)
        return "error"
    method = (pending or {}).get(msg["id"])
    if method is None:
        raise SchemaViolation(f"result for id {msg['id']!r}, which answers no pending request")
    defs = method_defs(method, _OPPOSITE[direction], unstable)
    if defs and "response" in defs:
        check(defs["response"], msg["result"], where=f"{method} result", unstable=unstable)
    return "result"


def _validate_call(msg: dict[str, Any], direction: Direction, allow_unknown: bool,
                   unstable: bool = False) -> str:
    method, kind = msg["method"], "request" if "id" in msg else "notification"
    if not isinstance(method, str):
        raise SchemaViolation(f"method must be a string: {_short(msg)}")
    defs = method_defs(method, direction, unstable)
    if defs is None:
        if method.startswith("_") or allow_unknown:
            return kind
        side = _HANDLER_SIDE[direction]
        raise SchemaViolation(
            f"{method!r} is not an ACP v1 method that the {side} handles ({direction})"
        )
    if kind not in defs:
        raise SchemaViolation(
            f"{method} is sent as a {kind}, but ACP defines it as a {next(iter(defs))}"
        )
    params = msg.get("params")
    if (
        method == "session/update"
        and isinstance(params, dict)
        and isinstance(params.get("update"), dict)
    ):
        update = params["update"]
        index = session_update_kinds(unstable).get(update.get("sessionUpdate"))
        if index is None:
            raise SchemaViolation(
                f"session/update: unknown sessionUpdate {update.get('sessionUpdate')!r}; "
                f"expected one of {sorted(session_update_kinds(unstable))}"
            )
        update_kind = update["sessionUpdate"]
        check(
            f"/$defs/SessionUpdate/oneOf/{index}",
            update,
            where=f"session/update {update_kind}",
            name=f"SessionUpdate variant {update_kind!r}",
            unstable=unstable,
        )
    check(defs[kind], params, where=f"{method} params", unstable=unstable)
    return kind


class Recorder:
    """Validates a transcript in both directions, pairing responses with their requests."""

    def __init__(self, *, allow_unknown_methods: bool = False, unstable: bool = False) -> None:
        self.allow_unknown_methods = allow_unknown_methods
        self.unstable = unstable
        """Validate against the unstable schema (features behind unstable capabilities)."""
        self.transcript: list[tuple[Direction, dict[str, Any]]] = []
        # direction a request was sent in -> {id: method} still unanswered
        self._pending: dict[Direction, dict[Any, str]] = {AGENT_TO_CLIENT: {}, CLIENT_TO_AGENT: {}}

    def record(self, direction: Direction, message: str | bytes | dict[str, Any]) -> dict[str, Any]:
        """Parse (if a line) and validate one message; return it as a dict."""
        msg = parse_line(message) if isinstance(message, str | bytes) else message
        answering = self._pending[_OPPOSITE[direction]]
        kind = validate_message(
            msg, direction, answering, allow_unknown_methods=self.allow_unknown_methods,
            unstable=self.unstable,
        )
        if kind == "request":
            self._pending[direction][msg["id"]] = msg["method"]
        elif kind in ("result", "error"):
            answering.pop(msg.get("id"), None)
        self.transcript.append((direction, msg))
        return msg

    def unanswered(self, direction: Direction | None = None) -> dict[Any, str]:
        """Requests (id -> method) sent in `direction` (default: either) not answered yet."""
        if direction is not None:
            return dict(self._pending[direction])
        return {**self._pending[CLIENT_TO_AGENT], **self._pending[AGENT_TO_CLIENT]}

    def messages(
        self, direction: Direction | None = None, method: str | None = None
    ) -> list[dict[str, Any]]:
        return [
            m
            for d, m in self.transcript
            if (direction is None or d == direction)
            and (method is None or m.get("method") == method)
        ]

    def updates(self, kind: str | None = None) -> list[dict[str, Any]]:
        """The `update` objects of the agent's `session/update`s, optionally of one `sessionUpdate`."""
        found = [m["params"]["update"] for m in self.messages(AGENT_TO_CLIENT, "session/update")]
        return [u for u in found if kind is None or u.get("sessionUpdate") == kind]


def parse_line(line: str | bytes) -> dict[str, Any]:
    """One ndjson line -> message; rejects embedded newlines, bad UTF-8 and non-JSON."""
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SchemaViolation(f"line is not UTF-8: {exc}") from None
    body = line[:-1] if line.endswith("\n") else line
    if "\n" in body:
        raise SchemaViolation("a message must fit on one line (embedded newline)")
    try:
        return json.loads(body)
    except ValueError as exc:
        raise SchemaViolation(f"line is not JSON ({exc}): {_short(body)}") from None


def _describe(error: ValidationError, where: str) -> str:
    error, message = _explain(error)
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"{where}{path}: {_short(message)}"


def _explain(error: ValidationError) -> tuple[ValidationError, str]:
    """Pick the useful error out of an anyOf/oneOf: the branch whose tag matched, or the tags."""
    if not error.context:
        return error, error.message
    branches: dict[Any, list[ValidationError]] = {}
    for sub in error.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    depth = len(error.absolute_path)
    expected = [
        sub.validator_value
        for subs in branches.values()
        for sub in subs
        if sub.validator == "const" and len(sub.absolute_path) <= depth + 1
    ]

    # A branch is ruled out when its tag (a const on the value or on one of its fields) fails,
    # or when the value is not even of its type (the `null` arm of an optional field).
    def ruled_out(subs: list[ValidationError]) -> bool:
        tag_failed = any(s.validator == "const" and len(s.absolute_path) <= depth + 1 for s in subs)
        wrong_type = all(s.validator == "type" and len(s.absolute_path) == depth for s in subs)
        return tag_failed or wrong_type

    matching = [subs for subs in branches.values() if not ruled_out(subs)]
    if len(matching) == 1:
        return _explain(best_match(matching[0]))
    if not matching and expected:
        tagged = error.context[0]
        return tagged, f"{tagged.instance!r} is not one of {expected}"
    return _explain(best_match(error.context))


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS] + "..."
