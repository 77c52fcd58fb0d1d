"""Reading stored transcript rows: the shapes other writers used, and rows that cannot be read.

Talaria writes a tool call as `{"id", "name", "arguments": str}`. A transcript written by
another tool, an older version or by hand may carry the OpenAI wire shape instead,
`{"id", "type": "function", "function": {"name", "arguments": str | object}}`: both read as
Talaria's. A row that still cannot be read (not JSON, not a message, a call without an id or
a name, a tool result without its call's id) is not fatal to the session it belongs to: it
becomes an `unreadable` event row in its place, saying which row and why, and the rest loads.
Event rows are transcript only (the live context leaves them out), so the model never sees
it; `session/load` shows it to the user (`talaria.acp_server.history`).
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

log = logging.getLogger(__name__)

UNREADABLE = "unreadable"
"""The `type` of the event row that stands for a row that could not be read."""


class UnreadableRow(ValueError):
    """A stored row that is not a message Talaria can use; the text says what is wrong."""


def read_row(seq: int | None, text: str, *, live: bool = False) -> dict[str, Any]:
    """Stored row `seq` as a message in Talaria's shape, or the `unreadable` event row;
    `live`: for a live context (see `live`: no `display`, left out as it is parsed)."""
    try:
        message = (_LIVE if live else _WHOLE).decode(text)
    except (json.JSONDecodeError, TypeError) as exc:
        return _refused(seq, UnreadableRow(f"not JSON ({exc})"))
    try:
        return checked(message)
    except UnreadableRow as exc:
        return _refused(seq, exc)


def read_snapshot(text: str) -> list[dict[str, Any]]:
    """A saved live context (a JSON list); its messages that cannot be read are left out."""
    out = []
    for message in json.loads(text, object_pairs_hook=_live_shared):
        try:
            out.append(checked(message))
        except UnreadableRow as exc:
            log.warning("a message of a saved context cannot be read, left out: %s", exc)
    return out


def _refused(seq: int | None, exc: UnreadableRow) -> dict[str, Any]:
    log.warning("stored message %s cannot be read, left out: %s", seq, exc)
    return unreadable(seq, str(exc))


def checked(message: Any) -> dict[str, Any]:
    """`message` in Talaria's shape (tool calls of either shape); raises UnreadableRow."""
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise UnreadableRow("not a message (a JSON object with a role)")
    calls = message.get("tool_calls")
    if calls:
        if not isinstance(calls, list):
            raise UnreadableRow("its tool_calls is not a list")
        for n, call in enumerate(calls):  # in place: a new list per row is a hole per row
            calls[n] = _call(call, n + 1)
    if message["role"] == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise UnreadableRow("a tool result without the id of its call (tool_call_id)")
    return message


SHARED_CHARS = 24
"""String values up to this long (roles, statuses, tool names, ids) are shared too."""


def _shared(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json's object hook: keys and short values interned. Each row is parsed on its own, so
    each would have its own copy of `"role"`, `"tool_call_id"`, `"completed"`...: a loaded
    20,000-message session held ~10 MB of them."""
    intern = sys.intern
    return {intern(k): intern(v) if type(v) is str and len(v) <= SHARED_CHARS else v
            for k, v in pairs}


def _live_shared(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if ("role", "tool") in pairs:  # dropped after the parse, it left a hole in the heap
        pairs = [pair for pair in pairs if pair[0] != "display"]
    return _shared(pairs)


_WHOLE = json.JSONDecoder(object_pairs_hook=_shared)
_LIVE = json.JSONDecoder(object_pairs_hook=_live_shared)
"""One decoder each: `json.loads` with a hook builds a new decoder for every row it reads."""


def _call(call: Any, n: int) -> dict[str, Any]:
    if not isinstance(call, dict):
        raise UnreadableRow(f"tool call {n} is not an object")
    wire = call.get("function")
    if isinstance(wire, dict) and "name" not in call:  # the OpenAI wire shape
        call = {**{k: v for k, v in call.items() if k not in ("function", "type")},
                "name": wire.get("name"), "arguments": wire.get("arguments")}
    if not isinstance(call.get("id"), str) or not call["id"]:
        raise UnreadableRow(f"tool call {n} has no id")
    if not isinstance(call.get("name"), str) or not call["name"]:
        raise UnreadableRow(f"tool call {n} has no name")
    arguments = call.get("arguments")
    if arguments is None:
        call["arguments"] = "{}"
    elif not isinstance(arguments, str):  # an object where the wire has its JSON text
        call["arguments"] = json.dumps(arguments, ensure_ascii=False)
    return call


def unreadable(seq: int | None, error: str) -> dict[str, Any]:
    """The event row standing in for a row that could not be read."""
    return {"role": "event", "type": UNREADABLE, "seq": seq, "error": error}


def live(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stored messages as a live context: without tool results whose call is not before them
    (its row was unreadable: a provider refuses a result for no call). Read with `live=True`,
    they have no `display` either: only the editor's replay reads it, from the transcript (a
    loaded 20,000-message session held ~2 MB of it)."""
    calls: set[str] = set()
    out = []
    for message in messages:
        if message.get("role") == "assistant":
            calls.update(c["id"] for c in message.get("tool_calls") or ())
        elif message.get("role") == "tool" and message.get("tool_call_id") not in calls:
            continue
        out.append(message)
    return out
