"""The JSON-RPC peer over real OS pipes: requests both ways, framing, bad input, errors."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from talaria.acp_server.jsonrpc import (
    Peer,
    Reply,
    RpcError,
)
from tests import ROOT
from tests.acp.jsonrpc_helpers import echo, serving, two_peers
from tests.acpschema import check

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_requests_in_both_directions_while_a_request_is_in_flight() -> None:
    def agent_side(agent: Peer) -> None:
        async def prompt(params: dict[str, Any]) -> dict[str, Any]:
            file = await agent.request("fs/read_text_file", {"path": params["path"]}, timeout=5)
            return {"stopReason": "end_turn", "read": file["content"]}

        agent.on_request("session/prompt", prompt)

    def client_side(client: Peer) -> None:
        async def read(params: dict[str, Any]) -> dict[str, Any]:
            return {"content": f"contents of {params['path']}"}

        client.on_request("fs/read_text_file", read)

    async with two_peers(agent_side, client_side) as (_, client):
        result = await client.request("session/prompt", {"path": "/a.py"}, timeout=5)
    assert result == {"stopReason": "end_turn", "read": "contents of /a.py"}


async def test_a_slow_handler_does_not_block_a_fast_one() -> None:
    release = anyio.Event()

    async def slow(params: dict[str, Any]) -> str:
        await release.wait()
        return "slow"

    async def fast(params: dict[str, Any]) -> str:
        return "fast"

    def setup(peer: Peer) -> None:
        peer.on_request("slow", slow)
        peer.on_request("fast", fast)

    async with serving(setup) as (_, wire, _):
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "slow", "params": {}})
        await wire.send({"jsonrpc": "2.0", "id": 2, "method": "fast", "params": {}})
        assert await wire.receive() == {"jsonrpc": "2.0", "id": 2, "result": "fast"}
        release.set()
        assert await wire.receive() == {"jsonrpc": "2.0", "id": 1, "result": "slow"}


async def test_notifications_reach_their_handler_and_unknown_ones_are_ignored() -> None:
    seen: list[dict[str, Any]] = []

    async def on_cancel(params: dict[str, Any]) -> None:
        seen.append(params)

    def setup(peer: Peer) -> None:
        peer.on_notification("session/cancel", on_cancel)
        peer.on_request("echo", echo)

    async with serving(setup) as (_, wire, _):
        await wire.send({"jsonrpc": "2.0", "method": "_unknown/thing", "params": {}})
        await wire.send({"jsonrpc": "2.0", "method": "no/such", "params": {"x": 1}})
        await wire.send(
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}}
        )
        await wire.send({"jsonrpc": "2.0", "id": 9, "method": "echo", "params": {"a": 1}})
        # Nothing was answered to the notifications: the first line is the echo.
        assert await wire.receive() == {"jsonrpc": "2.0", "id": 9, "result": {"a": 1}}
    assert seen == [{"sessionId": "s"}]


async def test_notify_writes_one_line() -> None:
    async with serving() as (peer, wire, _):
        await peer.notify("session/update", {"sessionId": "s", "update": {"x": "é"}})
        line = await wire.receive_line()
    assert (
        line
        == '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"x":"é"}}}'.encode()
    )


async def test_a_reply_runs_its_follow_up_after_the_response_is_written() -> None:
    def setup(peer: Peer) -> None:
        async def new_session(params: dict[str, Any]) -> Reply:
            async def then() -> None:
                await peer.notify("session/update", {"sessionId": "s1", "update": {}})

            return Reply({"sessionId": "s1"}, then=then)

        peer.on_request("session/new", new_session)

    async with serving(setup) as (_, wire, _):
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {}})
        first, second = await wire.receive(), await wire.receive()
    assert first == {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s1"}}
    assert second["method"] == "session/update"


async def test_concurrent_writes_never_interleave() -> None:
    def setup(peer: Peer) -> None:
        async def burst(params: dict[str, Any]) -> int:
            async with anyio.create_task_group() as tg:
                for i in range(20):
                    tg.start_soon(peer.notify, "_burst", {"i": i, "data": str(i % 10) * 200_000})
            return 20

        peer.on_request("burst", burst)

    async with serving(setup) as (_, wire, _):
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "burst", "params": {}})
        messages = [await wire.receive() for _ in range(21)]
    chunks = [m["params"] for m in messages if m.get("method") == "_burst"]
    assert sorted(c["i"] for c in chunks) == list(range(20))
    assert all(c["data"] == str(c["i"] % 10) * 200_000 for c in chunks)
    assert messages[-1] == {"jsonrpc": "2.0", "id": 1, "result": 20}


async def test_several_messages_in_one_write_and_one_message_in_many_writes() -> None:
    async with serving(lambda peer: peer.on_request("echo", echo)) as (_, wire, _):
        lines = [
            json.dumps({"jsonrpc": "2.0", "id": i, "method": "echo", "params": {"i": i}})
            for i in range(3)
        ]
        await wire.send_raw(("\n".join(lines) + "\n").encode())
        assert [(await wire.receive())["id"] for _ in range(3)] == [0, 1, 2]
        split = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "echo", "params": {}}) + "\r\n"
        for byte in split.encode():
            await wire.send_raw(bytes([byte]))
        assert await wire.receive() == {"jsonrpc": "2.0", "id": 3, "result": {}}


async def test_a_50_mb_line_round_trips() -> None:
    text = "ü" * 25_000_000  # 50 MB of UTF-8 in a single line, each way
    async with two_peers(
        lambda agent: None, lambda client: client.on_request("fs/read_text_file", echo)
    ) as (
        agent,
        _,
    ):
        result = await agent.request("fs/read_text_file", {"content": text}, timeout=30)
    assert len(result["content"]) == len(text) and result["content"] == text


async def test_a_line_over_the_limit_is_refused_and_serving_goes_on() -> None:
    async with serving(lambda peer: peer.on_request("echo", echo), max_line_bytes=1000) as (
        _,
        wire,
        _,
    ):
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {"x": "y" * 5000}})
        error = await wire.receive()
        await wire.send({"jsonrpc": "2.0", "id": 2, "method": "echo", "params": {"x": "y"}})
        assert await wire.receive() == {"jsonrpc": "2.0", "id": 2, "result": {"x": "y"}}
    assert error["id"] is None and error["error"]["code"] == -32600
    assert "longer than 1000 bytes" in error["error"]["data"]


# -- errors --------------------------------------------------------------------------------


async def test_garbage_gets_a_parse_error_with_null_id_then_serving_goes_on() -> None:
    async with serving(lambda peer: peer.on_request("echo", echo)) as (_, wire, _):
        await wire.send_raw(b"this is not json\n")
        await wire.send_raw(b"\xff\xfe\n")
        await wire.send_raw(b"\n   \n")  # blank lines are skipped silently
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {}})
        first, second, third = [await wire.receive() for _ in range(3)]
    for error in (first, second):
        assert error["id"] is None and error["error"]["code"] == -32700
        check("Error", error["error"])
    assert third == {"jsonrpc": "2.0", "id": 1, "result": {}}


@pytest.mark.parametrize(
    ("raw", "code", "answer_id"),
    [
        ({"jsonrpc": "1.0", "id": 1, "method": "echo", "params": {}}, -32600, 1),
        ({"id": 2, "method": "echo", "params": {}}, -32600, 2),
        ({"jsonrpc": "2.0", "id": 3, "method": 5, "params": {}}, -32600, 3),
        ({"jsonrpc": "2.0", "id": {"no": 1}, "method": "echo"}, -32600, None),
        ({"jsonrpc": "2.0", "id": 4, "method": "echo", "params": [1, 2]}, -32602, 4),
        ({"jsonrpc": "2.0", "id": 5, "method": "echo", "params": "x"}, -32602, 5),
        ({"jsonrpc": "2.0", "id": 6, "method": "no/such/method", "params": {}}, -32601, 6),
        ({"jsonrpc": "2.0", "id": 7, "method": "_talaria/unknown", "params": {}}, -32601, 7),
        ([{"jsonrpc": "2.0", "id": 8, "method": "echo", "params": {}}], -32600, None),
        (42, -32600, None),
    ],
)
async def test_invalid_messages_get_the_right_error(raw: Any, code: int, answer_id: Any) -> None:
    async with serving(lambda peer: peer.on_request("echo", echo)) as (_, wire, _):
        await wire.send_raw(json.dumps(raw).encode() + b"\n")
        answer = await wire.receive()
    assert answer["id"] == answer_id and answer["error"]["code"] == code
    check("Error", answer["error"])


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (RpcError.invalid_params("cwd must be absolute"), -32602),
        (RpcError.method_not_found("x/y"), -32601),
        (RpcError.internal("disk full"), -32603),
        (RpcError.auth_required("set OPENAI_API_KEY"), -32000),
        (RpcError.resource_not_found("session s1"), -32002),
        (RpcError.request_cancelled(), -32800),
        (RpcError(-32042, "Custom", {"k": 1}), -32042),
    ],
)
async def test_a_raised_rpc_error_is_the_answer(error: RpcError, code: int) -> None:
    async def fail(params: dict[str, Any]) -> None:
        raise error

    async with serving(lambda peer: peer.on_request("fail", fail)) as (_, wire, _):
        await wire.send({"jsonrpc": "2.0", "id": "abc", "method": "fail", "params": {}})
        answer = await wire.receive()
    assert answer == {"jsonrpc": "2.0", "id": "abc", "error": error.to_json()}
    assert answer["error"]["code"] == code
    check("Error", answer["error"])


async def test_a_crashing_handler_answers_internal_error_without_traceback_or_paths(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def crash(params: dict[str, Any]) -> None:
        raise ValueError(f"bad thing in {ROOT}/agent/loop.py\nsecond line")

    async with serving(lambda peer: peer.on_request("crash", crash)) as (_, wire, _):
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "crash", "params": {}})
        line = await wire.receive_line()
    answer = json.loads(line)
    assert answer["error"] == {
        "code": -32603,
        "message": "Internal error",
        "data": "ValueError: bad thing in agent/loop.py",
    }
    assert b"Traceback" not in line and str(ROOT).encode() not in line
    assert "Traceback" in caplog.text  # the full story goes to the log


async def test_an_unserialisable_result_is_an_internal_error() -> None:
    async def weird(params: dict[str, Any]) -> Any:
        return {"value": float("nan")}

    async with serving(lambda peer: peer.on_request("weird", weird)) as (_, wire, _):
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "weird", "params": {}})
        answer = await wire.receive()
    assert answer["error"]["code"] == -32603
