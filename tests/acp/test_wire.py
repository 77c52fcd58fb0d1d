"""Hostile lines at the JSON-RPC peer: each gets a correct error or nothing, and serving goes on.

Each class of issue 9 items 7-10 with its variants: ids JSON-RPC or the ACP schema cannot carry,
constants Python accepts but JSON does not, nesting, strings that cannot be encoded, malformed
notifications, answers that cannot be encoded.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from talaria.acp_server import wire
from talaria.acp_server.jsonrpc import Peer, RpcError
from tests.acp.test_jsonrpc import echo, serving
from tests.acpschema import check

pytestmark = pytest.mark.anyio
OK = {"jsonrpc": "2.0", "id": "after", "method": "echo", "params": {"still": "serving"}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def setup(peer: Peer) -> None:
    peer.on_request("echo", echo)

    async def nan(params: dict[str, Any]) -> Any:
        return {"value": float(params.get("x", "nan"))}

    async def bad_error(params: dict[str, Any]) -> Any:
        raise RpcError(-32602, "Invalid params", {"value": float("inf")})

    peer.on_request("nan", nan)
    peer.on_request("bad_error", bad_error)


async def answers(*lines: bytes) -> list[dict[str, Any]]:
    """Every answer to `lines`, up to and including the answer to a final good request."""
    async with serving(setup) as (_, wire_end, _):
        for line in lines:
            await wire_end.send_raw(line + b"\n")
        await wire_end.send(OK)
        got = []
        while not got or got[-1].get("id") != "after":
            got.append(await wire_end.receive())
    assert got[-1]["result"] == {"still": "serving"}
    for answer in got:
        check("RequestId", answer["id"])
        if "error" in answer:
            check("Error", answer["error"])
    return got[:-1]


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b'{"jsonrpc":"2.0","id":1e999,"method":"echo"}', -32600),
        (b'{"jsonrpc":"2.0","id":-1e999,"method":"echo"}', -32600),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"echo"}', -32600),
        (b'{"jsonrpc":"2.0","id":1.0,"method":"echo"}', -32600),
        (b'{"jsonrpc":"2.0","id":9223372036854775808,"method":"echo"}', -32600),
        (b'{"jsonrpc":"2.0","id":-9223372036854775809,"method":"echo"}', -32600),
        (b'{"jsonrpc":"2.0","id":true,"method":"echo"}', -32600),
        (b'{"jsonrpc":"2.0","id":[1],"method":"echo"}', -32600),
        (b'{"jsonrpc":"2.0","id":"\\ud800","method":"echo"}', -32600),
        (b'{"jsonrpc":"2.0","id":NaN,"method":"echo"}', -32700),
        (b'{"jsonrpc":"2.0","id":Infinity,"method":"echo"}', -32700),
        (b'{"jsonrpc":"2.0","id":-Infinity,"method":"echo"}', -32700),
        (b'{"jsonrpc":"2.0","id":1' + b"0" * 5000 + b',"method":"echo"}', -32700),
        (b"[" * 100_000, -32700),
        (b"{\"a\":" * 100_000, -32700),
        (b'{"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":' + b"[" * 50_000 + b"]" * 50_000 + b"}}", -32700),
        (b'{"jsonrpc":"2.0","id":"\xed\xa0\x80","method":"echo"}', -32600),
    ],
)
async def test_ids_and_values_python_accepts_but_json_rpc_does_not(line: bytes, code: int) -> None:
    [answer] = await answers(line)
    assert answer["error"]["code"] == code
    assert answer["id"] is None  # the id itself could not be trusted


@pytest.mark.parametrize(
    ("params", "where"),
    [
        ('{"sessionId": "\\ud800"}', "params.sessionId"),
        ('{"a": {"b": ["ok", "\\udfff x"]}}', "params.a.b[1]"),
        ('{"\\udc80key": 1}', "a key in params"),
        ('{"deep": ' + "[" * 150 + "]" * 150 + "}", "params nests deeper than"),
    ],
)
async def test_params_that_cannot_be_used_are_invalid_params(params: str, where: str) -> None:
    line = b'{"jsonrpc":"2.0","id":7,"method":"echo","params":' + params.encode() + b"}"
    [answer] = await answers(line)
    assert answer["id"] == 7 and answer["error"]["code"] == -32602
    assert answer["error"]["data"].startswith(where)


@pytest.mark.parametrize("levels", [wire.MAX_DEPTH + 1, wire.MAX_PARSE_DEPTH - 2])
async def test_a_request_nested_too_deep_still_gets_its_id_back(levels: int) -> None:
    params = b'{"a":' + b"[" * levels + b"]" * levels + b"}"
    [answer] = await answers(b'{"jsonrpc":"2.0","id":"deep","method":"echo","params":' + params + b"}")
    assert answer["id"] == "deep" and answer["error"]["code"] == -32602


def test_nesting_counts_structure_not_brackets_in_strings() -> None:
    assert wire.nesting(b'[[1],{"a":"[[[[{{"}]') == 2
    assert wire.nesting(b'"a\\"[[" [x]') == 1
    assert wire.nesting(b"[" * 1000) == 1000
    assert wire.nesting(b'{"a":1}') == 1 and wire.nesting(b"1") == 0
    with pytest.raises(ValueError, match="deeper than"):
        wire.decode_line(b"[" * (wire.MAX_PARSE_DEPTH + 1) + b"]" * (wire.MAX_PARSE_DEPTH + 1))
    message, suspect = wire.decode_line(b"[" * wire.MAX_PARSE_DEPTH + b"]" * wire.MAX_PARSE_DEPTH)
    assert suspect and isinstance(message, list)


async def test_a_valid_surrogate_pair_and_moderate_nesting_are_fine() -> None:
    params = {"emoji": "\U0001f600", "nested": json.loads("[" * 50 + "]" * 50)}
    line = b'{"jsonrpc":"2.0","id":8,"method":"echo","params":' + json.dumps(params).encode() + b"}"
    [answer] = await answers(line)
    assert answer["result"] == params


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","method":"session/cancel","params":5}',
        b'{"jsonrpc":"2.0","method":"session/cancel"}',
        b'{"jsonrpc":"2.0","method":"echo","params":"x"}',
        b'{"jsonrpc":"2.0","method":"echo","params":[1,2,3,4,5]}',
        b'{"jsonrpc":"2.0","method":"echo","params":{"s":"\\ud800"}}',
        b'{"jsonrpc":"2.0","method":"no/such/notification","params":{}}',
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1e999}}',
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":[1]}}',
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":null}',
    ],
)
async def test_notifications_are_never_answered(line: bytes) -> None:
    """Well-formed (JSON-RPC 2.0, section 4.1): no id, jsonrpc "2.0", a string method."""
    assert await answers(line) == []


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","method":1,"params":"bar"}',  # JSON-RPC 2.0's own example (section 7)
        b'{"jsonrpc":"2.0","method":5}',
        b'{"jsonrpc":"2.0","method":{}}',
        b'{"jsonrpc":"2.0","method":null,"params":[]}',
        b'{"jsonrpc":"2.0","method":["session/cancel"]}',
        b'{"jsonrpc":"2.0","method":true}',
        b'{"method":"session/cancel","params":5}',
        b'{"method":"session/cancel"}',
        b'{"jsonrpc":"1.0","method":"echo","params":{}}',
        b'{"jsonrpc":2.0,"method":"echo","params":{}}',
        b'{"jsonrpc":null,"method":"echo"}',
        b'{"jsonrpc":"2.0"}',
        b'{"foo":"boo"}',
        b'{}',
    ],
)
async def test_a_line_without_id_that_is_no_notification_is_an_invalid_request(line: bytes) -> None:
    [answer] = await answers(line)
    assert answer["id"] is None and answer["error"]["code"] == -32600, answer
    assert "Traceback" not in json.dumps(answer)


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":99,"result":{}}',
        b'{"jsonrpc":"2.0","id":1e999,"result":{}}',
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"x"}}',
        b'{"jsonrpc":"2.0","id":"\\ud800","result":"\\ud800"}',
        b'{"result":5}',
    ],
)
async def test_answers_to_nothing_are_ignored(line: bytes) -> None:
    assert await answers(line) == []


async def test_a_result_or_error_json_cannot_carry_is_an_internal_error() -> None:
    lines = [b'{"jsonrpc":"2.0","id":1,"method":"nan","params":{}}',
             b'{"jsonrpc":"2.0","id":2,"method":"nan","params":{"x":"inf"}}',
             b'{"jsonrpc":"2.0","id":3,"method":"bad_error","params":{}}']
    got = await answers(*lines)
    assert sorted(a["id"] for a in got) == [1, 2, 3]
    for answer in got:
        assert answer["error"]["code"] == -32603
        assert "cannot be encoded as JSON" in answer["error"]["data"]


async def test_an_answer_with_a_lone_surrogate_reaches_the_caller_mended() -> None:
    async with serving() as (peer, wire_end, _), anyio.create_task_group() as tg:
        box: list[Any] = []

        async def ask() -> None:
            box.append(await peer.request("fs/read_text_file", {}))

        tg.start_soon(ask)
        request = await wire_end.receive()
        await wire_end.send_raw(
            b'{"jsonrpc":"2.0","id":%d,"result":{"content":"a\\ud800b"}}\n' % request["id"]
        )
    assert box == [{"content": "a\ufffdb"}]


def test_valid_ids_are_the_schema_s_request_ids() -> None:
    for good in (None, 0, -(2**63), 2**63 - 1, "", "abc", "\U0001f600"):
        assert wire.valid_id(good), good
        check("RequestId", good)
    for bad in (True, False, 1.0, 1.5, float("inf"), float("nan"), 2**63, -(2**63) - 1,
                "\ud800", [], {}):
        assert not wire.valid_id(bad), bad


def test_problem_bounds_depth_exactly_at_max_depth() -> None:
    def nest(levels: int) -> Any:
        value: Any = "leaf"
        for _ in range(levels):
            value = [value]
        return value

    assert wire.problem(nest(wire.MAX_DEPTH), "params") is None
    assert "deeper than" in (wire.problem(nest(wire.MAX_DEPTH + 1), "params") or "")


def test_encode_refuses_what_json_cannot_carry() -> None:
    for value in (float("nan"), float("inf"), object(), 10**5000):
        with pytest.raises((ValueError, TypeError)):
            wire.encode({"v": value})
    assert wire.encode({"s": "\ud800"}) == b'{"s":"?"}\n'
