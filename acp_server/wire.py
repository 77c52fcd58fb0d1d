"""JSON lines in and out of the JSON-RPC peer: any line decodes or fails cleanly, any reply encodes.

Python's `json` is more liberal than JSON and than the ACP schema, and each gap once killed the
server (issue 9): `NaN` and `Infinity` parse, `1e999` parses to an infinite float that cannot be
written back, 100,000 `[` raise RecursionError, `\\ud800` parses to a string that cannot be
encoded. So:

    decode_line(line) -> (message, suspect)   ValueError (one line) for anything not JSON
                                              or nested deeper than MAX_PARSE_DEPTH;
                                              `suspect`: the line may hold a lone surrogate or
                                              deep nesting, so `problem()` must look
    problem(value, "params") -> str | None    "params.prompt[0].text is not valid Unicode ..."
    repaired(value)                           lone surrogates replaced by U+FFFD
    valid_id(value)                           null, an int64 or a valid string (the schema's RequestId)
    encode(message) -> bytes                  one line; raises ValueError/TypeError if impossible
    answer_line(id, method, answer) -> bytes  a response line, or a -32603 one saying why not
    Checks                                    what a peer checks beyond JSON-RPC (ACP's:
                                              `params.ACP_CHECKS`)
    RpcError                                  a JSON-RPC error object (codes: see `jsonrpc`)

Error codes. No line ends the server: each gets one answer, or none when it is a notification
(an object without `id` whose `jsonrpc` is "2.0" and whose `method` is a string, whatever its
params) or a response (`result` or `error`, no `method`: answering one could ping-pong forever).

    -32700  Parse error          not JSON (also NaN, Infinity, invalid UTF-8, nesting the parser
                                 cannot hold); id null
    -32600  Invalid request      not a request object (JSON-RPC 2.0, section 5: also a line
                                 without `id` whose `method` is not a string or whose `jsonrpc`
                                 is not "2.0": not a notification, so answered with id null;
                                 a batch: ACP v1 has none, one -32600 answers it, id null); an
                                 id that is not a string, an int64 or null (floats, 1e999,
                                 booleans, objects, arrays) is answered with id null
    -32601  Method not found
    -32602  Invalid params       `data` says which field; a field of the wrong type (the tables
                                 of `params`), strings that cannot be encoded (lone surrogates)
                                 and params nesting deeper than `wire.MAX_DEPTH`
    -32603  Internal error       a bug: a one-line `data` reason, never a traceback or a path
    -32800  Request cancelled    by `$/cancel_request`
    -32000  Authentication required   (ACP) no credentials, or the model refused the key
    -32002  Resource not found   (ACP) unknown session, missing cwd; `data` names it
    -32050  Model error          (Talaria) `session/prompt` failed in the model after retries
                                 and compaction: rate limited, overloaded, unreachable, out of
                                 context, billing... The message names the endpoint and what to
                                 do; `data` = {"cause", "provider", "model", "endpoint",
                                 "retries", "status", "detail"} (see `providers.errors`)
"""

from __future__ import annotations

import array
import itertools
import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

MAX_DEPTH = 100
"""Deepest nesting accepted in `params` (arrays and objects). ACP messages nest about 6 deep,
`_meta` a little more; deeper values could only exhaust the stack of code that walks them."""
MAX_PARSE_DEPTH = 500
"""Lines nested deeper are not parsed (-32700): the parser recurses, and how deep it gets before
a RecursionError depends on where it is called from. Up to here it always succeeds, so a
request nested 101-500 deep still gets its own id back (with -32602)."""
INT64 = 2**63
MAX_ERROR_DATA_CHARS = 200
MODEL_ERROR = -32050
"""`session/prompt` failed in the model (Talaria's own code; see the table above)."""
JsonObject = dict[str, Any]
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# A lone surrogate reaches a parsed string only through a \uD800-\uDFFF escape, or as raw
# surrogate bytes (json.loads decodes bytes with "surrogatepass"). Valid pairs match too:
# this only says when to look. Two patterns, not one alternation: each starts with a literal
# byte the regex engine scans for quickly (0.6 ms per MB of prose; one alternation: 4.7 ms).
_SURROGATE_HINTS = (re.compile(rb"\\u[dD][89a-fA-F]"), re.compile(rb"\xed[\xa0-\xbf]"))
log = logging.getLogger(__name__)
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_BRACKET_SIGNS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


class RpcError(Exception):
    """A JSON-RPC error: `code`, a one-sentence `message`, optional `data`."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} ({code})" + ("" if data is None else f": {data}"))
        self.code, self.message, self.data = code, message, data

    @classmethod
    def parse_error(cls, reason: str | None = None) -> RpcError:
        return cls(-32700, "Parse error", reason)

    @classmethod
    def invalid_request(cls, reason: str | None = None) -> RpcError:
        return cls(-32600, "Invalid request", reason)

    @classmethod
    def method_not_found(cls, method: str) -> RpcError:
        return cls(-32601, "Method not found", {"method": method})

    @classmethod
    def invalid_params(cls, reason: str | None = None) -> RpcError:
        return cls(-32602, "Invalid params", reason)

    @classmethod
    def internal(cls, reason: str | None = None) -> RpcError:
        return cls(-32603, "Internal error", reason)

    @classmethod
    def auth_required(cls, reason: str | None = None) -> RpcError:
        return cls(-32000, "Authentication required", reason)

    @classmethod
    def resource_not_found(cls, what: str, **about: Any) -> RpcError:
        """`what` in words for the message; `about` the fields it is about, for `data`."""
        return cls(-32002, f"Resource not found: {what}", {"reason": what, **about})

    @classmethod
    def from_model(cls, failure: Any) -> RpcError:
        """A failed model (the host's `ModelFailure`) as ACP's answer: -32000 when no model
        could be made or its key was refused (clients then offer their sign-in, which runs
        `talaria setup`), -32050 for every other cause; the message names the endpoint and
        what to do, `data` classifies it."""
        if failure.setup:
            return cls.auth_required(failure.message)
        return cls(-32000 if failure.auth else MODEL_ERROR, failure.message, failure.data)

    @classmethod
    def request_cancelled(cls) -> RpcError:
        return cls(-32800, "Request cancelled")

    @classmethod
    def malformed_answer(cls, reason: str) -> RpcError:
        """The other side's answer to our request does not have the types its method's has."""
        return cls(-32603, f"Malformed response: {reason}")

    @classmethod
    def from_json(cls, error: Any) -> RpcError:
        if not isinstance(error, dict) or not isinstance(error.get("code"), int):
            return cls(-32603, "Malformed error response", error)
        return cls(error["code"], str(error.get("message", "")), error.get("data"))

    def to_json(self) -> JsonObject:
        error: JsonObject = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


@dataclass(frozen=True, slots=True)
class Checks:
    """What a peer checks beyond JSON-RPC. Each returns the value to go on with, or raises
    RpcError naming the wrong field: `params(method, params)` of incoming requests and
    notifications, `result(method, result)` of the answers to our requests."""

    params: Callable[[str, JsonObject], JsonObject]
    result: Callable[[str, Any], Any]


NO_CHECKS = Checks(params=lambda method, params: params, result=lambda method, result: result)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode_line(line: bytes) -> tuple[Any, bool]:
    """The message on `line` and whether `problem()` needs to look at it (see the docstring)."""
    brackets = line.count(b"[") + line.count(b"{")  # C speed: a bound on the depth
    depth = nesting(line) if brackets > MAX_DEPTH else 0
    if depth > MAX_PARSE_DEPTH:
        raise ValueError(f"nested deeper than {MAX_PARSE_DEPTH} levels")
    try:
        message = json.loads(line, parse_constant=_no_constants)
    except RecursionError:  # cannot happen below MAX_PARSE_DEPTH; kept as a last guard
        raise ValueError("nested too deeply to parse") from None
    except ValueError as exc:  # also invalid UTF-8, and integers over 4300 digits
        raise ValueError(first_line(str(exc))) from None
    return message, depth > MAX_DEPTH or any(hint.search(line) for hint in _SURROGATE_HINTS)


def nesting(line: bytes) -> int:
    """How deep the arrays and objects of a JSON text nest (brackets in strings don't count).

    No Python loop over the line: strings go by regex, the brackets become +1/-1 bytes, and
    their running sum is taken in C (about 10 ms per MB of brackets).
    """
    signs = _STRING.sub(b"", line).translate(None, _NOT_BRACKETS).translate(_BRACKET_SIGNS)
    return max(itertools.accumulate(array.array("b", signs)), default=0)


def problem(value: Any, name: str) -> str | None:
    """What makes `value` unusable: nesting deeper than MAX_DEPTH, or a string (or key) with a
    lone surrogate, which no UTF-8 encoder (SQLite, the OS, the model's API) accepts."""
    stack: list[tuple[Any, str, int]] = [(value, name, 1)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            if _LONE_SURROGATE.search(item):
                return f"{path} is not valid Unicode (it holds a lone surrogate)"
        elif isinstance(item, dict | list):
            if depth > MAX_DEPTH:
                return f"{name} nests deeper than {MAX_DEPTH} levels"
            if isinstance(item, list):
                stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(item))
                continue
            for key, v in item.items():
                if _LONE_SURROGATE.search(key):
                    return f"a key in {path} is not valid Unicode (it holds a lone surrogate)"
                stack.append((v, f"{path}.{key}", depth + 1))
    return None


def repaired(value: Any) -> Any:
    """`value` with lone surrogates replaced by U+FFFD, as undecodable bytes read from a file
    would be (for answers from the editor, which cannot be refused)."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [repaired(v) for v in value]
    if isinstance(value, dict):
        return {repaired(k): repaired(v) for k, v in value.items()}
    return value


def valid_id(value: Any) -> bool:
    """A request id the ACP schema allows and that can be echoed: null, an int64, a string."""
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, int | str):
        return False  # floats too: 1.5, 1e999 and NaN cannot be echoed faithfully
    if isinstance(value, int):
        return -INT64 <= value < INT64
    return _LONE_SURROGATE.search(value) is None


def encode(message: dict[str, Any]) -> bytes:
    """One line of JSON. Raises ValueError (NaN, infinities, huge ints, deep nesting) or
    TypeError (a value JSON has no form for)."""
    try:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except RecursionError:
        raise ValueError("the message nests too deeply to encode") from None
    # "replace": a lone surrogate (say, from an undecodable file name) must not kill the reply.
    return (text + "\n").encode("utf-8", "replace")


def answer_line(msg_id: Any, method: str, answer: JsonObject) -> bytes:
    """The response line; a result or error that JSON cannot carry becomes a -32603 saying so."""
    try:
        return encode({"jsonrpc": "2.0", "id": msg_id, **answer})
    except (ValueError, TypeError) as exc:
        log.error("the answer to %s cannot be sent as JSON: %s", method or "a request", exc)
        reason = f"the answer cannot be encoded as JSON: {first_line(str(exc))}"
        error = RpcError.internal(reason).to_json()
        return encode({"jsonrpc": "2.0", "id": msg_id, "error": error})


def first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0][:MAX_ERROR_DATA_CHARS] if lines else ""


@cache
def _install_prefixes() -> list[str]:
    # Not sys.prefix: stripping "/usr/" would garble the user's own paths in messages. Asked
    # for on the first error, not at import: sysconfig's paths cost `initialize` ~15 ms (and
    # the module itself ~1 ms).
    import sysconfig

    paths = {str(Path(__file__).resolve().parents[1])}
    paths.update(
        sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")
    )
    prefixes = {p.rstrip(os.sep) + os.sep for p in paths if p and len(p) > 1}
    return sorted(prefixes, key=len, reverse=True)  # longest first: site-packages before stdlib



def error_reason(exc: BaseException) -> str:
    """`ClassName: first line of the message`, at most 200 chars, install paths stripped.

    Goes to the editor's user in a -32603 `data`: the agent's own file layout is not theirs.
    """
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    for prefix in _install_prefixes():
        text = text.replace(prefix, "")
    return first_line(text)
