"""The JSON-RPC peer over real OS pipes, and the ACP schema helper the other tests rely on."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import anyio
import pytest

from talaria.acp_server.jsonrpc import (
    MAX_ABANDONED,
    ConnectionClosed,
    Peer,
    Reply,
    RequestTimeout,
    RpcError,
    error_reason,
)
from talaria.acp_server.stdio import fd_streams
from tests import ROOT
from tests.acpschema import Recorder, SchemaViolation, check, parse_line, validate_message

pytestmark = pytest.mark.anyio
PROJECT_ROOT = ROOT


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Wire:
    """The far end of a peer's pipes, speaking raw bytes: a client that may misbehave."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.reader, self.writer = fd_streams(read_fd, write_fd)
        self._buf = bytearray()

    async def send_raw(self, data: bytes) -> None:
        await self.writer.send(data)

    async def send(self, msg: dict[str, Any]) -> None:
        await self.send_raw(json.dumps(msg).encode() + b"\n")

    async def receive_line(self) -> bytes:
        with anyio.fail_after(5):
            while (newline := self._buf.find(b"\n")) < 0:
                self._buf += await self.reader.receive()
        line = bytes(self._buf[:newline])
        del self._buf[: newline + 1]
        return line

    async def receive(self) -> dict[str, Any]:
        return json.loads(await self.receive_line())

    async def close(self) -> None:
        await self.writer.aclose()


@asynccontextmanager
async def serving(
    setup: Callable[[Peer], None] = lambda peer: None, **peer_options: Any
) -> AsyncIterator[tuple[Peer, Wire, anyio.Event]]:
    """A Peer served over two OS pipes; yields it, the Wire at the other end, and an Event
    set when `serve()` returns."""
    to_peer_r, to_peer_w = os.pipe()
    from_peer_r, from_peer_w = os.pipe()
    peer_streams = fd_streams(to_peer_r, from_peer_w)
    peer = Peer(*peer_streams, **peer_options)
    setup(peer)
    wire, served = Wire(from_peer_r, to_peer_w), anyio.Event()

    async def serve() -> None:
        await peer.serve()
        served.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            yield peer, wire, served
            await wire.close()  # EOF for the peer
    finally:
        for stream in (*peer_streams, wire.reader, wire.writer):
            await stream.aclose()


@asynccontextmanager
async def two_peers(
    setup_agent: Callable[[Peer], None], setup_client: Callable[[Peer], None]
) -> AsyncIterator[tuple[Peer, Peer]]:
    a_r, b_w = os.pipe()
    b_r, a_w = os.pipe()
    agent_streams, client_streams = fd_streams(a_r, a_w), fd_streams(b_r, b_w)
    agent, client = Peer(*agent_streams), Peer(*client_streams)
    setup_agent(agent)
    setup_client(client)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(agent.serve)
            tg.start_soon(client.serve)
            yield agent, client
            await client_streams.writer.aclose()  # EOF both ways: both serve() return
            await agent_streams.writer.aclose()
    finally:
        for stream in (*agent_streams, *client_streams):
            await stream.aclose()


async def echo(params: dict[str, Any]) -> dict[str, Any]:
    return params


# -- requests, responses, notifications ------------------------------------------------------


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
        raise ValueError(f"bad thing in {PROJECT_ROOT}/agent/loop.py\nsecond line")

    async with serving(lambda peer: peer.on_request("crash", crash)) as (_, wire, _):
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "crash", "params": {}})
        line = await wire.receive_line()
    answer = json.loads(line)
    assert answer["error"] == {
        "code": -32603,
        "message": "Internal error",
        "data": "ValueError: bad thing in agent/loop.py",
    }
    assert b"Traceback" not in line and str(PROJECT_ROOT).encode() not in line
    assert "Traceback" in caplog.text  # the full story goes to the log


async def test_an_unserialisable_result_is_an_internal_error() -> None:
    async def weird(params: dict[str, Any]) -> Any:
        return {"value": float("nan")}

    async with serving(lambda peer: peer.on_request("weird", weird)) as (_, wire, _):
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "weird", "params": {}})
        answer = await wire.receive()
    assert answer["error"]["code"] == -32603


def test_error_reason_is_one_short_line() -> None:
    assert error_reason(KeyError("x")) == "KeyError: 'x'"
    assert error_reason(RuntimeError()) == "RuntimeError"
    assert len(error_reason(OSError("y" * 1000))) == 200


async def test_an_error_answer_raises_rpc_error_at_the_caller() -> None:
    async with two_peers(lambda agent: None, lambda client: None) as (agent, _):
        with pytest.raises(RpcError) as caught:
            await agent.request("terminal/create", {"command": "ls"}, timeout=5)
    assert caught.value.code == -32601 and caught.value.data == {"method": "terminal/create"}


# -- cancellation, timeouts, EOF -----------------------------------------------------------


async def test_cancel_request_cancels_the_handler_which_answers_32800() -> None:
    cancelled = anyio.Event()

    async def forever(params: dict[str, Any]) -> None:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    async with serving(lambda peer: peer.on_request("forever", forever)) as (_, wire, _):
        await wire.send({"jsonrpc": "2.0", "id": 7, "method": "forever", "params": {}})
        await wire.send(
            {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 99}}
        )
        await wire.send(
            {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 7}}
        )
        answer = await wire.receive()
    assert cancelled.is_set()
    assert answer == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32800, "message": "Request cancelled"},
    }


async def test_a_cancelled_handler_may_still_answer_with_a_result() -> None:
    started = anyio.Event()

    async def prompt(params: dict[str, Any]) -> dict[str, str]:
        started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            return {"stopReason": "cancelled"}
        raise AssertionError("unreachable")

    async with serving(lambda peer: peer.on_request("session/prompt", prompt)) as (_, wire, _):
        await wire.send({"jsonrpc": "2.0", "id": "p", "method": "session/prompt", "params": {}})
        await started.wait()
        await wire.send(
            {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "p"}}
        )
        answer = await wire.receive()
    assert answer == {"jsonrpc": "2.0", "id": "p", "result": {"stopReason": "cancelled"}}


async def test_a_request_times_out_and_the_other_side_is_told() -> None:
    async with serving() as (peer, wire, _):
        with pytest.raises(RequestTimeout, match="terminal/output: no response within 0.2 s"):
            await peer.request("terminal/output", {"terminalId": "t"}, timeout=0.2)
        request, cancel = await wire.receive(), await wire.receive()
    assert request["method"] == "terminal/output"
    assert cancel == {
        "jsonrpc": "2.0",
        "method": "$/cancel_request",
        "params": {"requestId": request["id"]},
    }


async def test_cancelling_a_caller_cancels_the_handler_on_the_other_side() -> None:
    started, handler_cancelled = anyio.Event(), anyio.Event()

    def client_side(client: Peer) -> None:
        async def permission(params: dict[str, Any]) -> None:
            started.set()
            try:
                await anyio.sleep_forever()
            finally:
                handler_cancelled.set()

        client.on_request("session/request_permission", permission)

    async with two_peers(lambda agent: None, client_side) as (agent, _):
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(agent.request, "session/request_permission", {}, timeout=None))
            await started.wait()
            tg.cancel_scope.cancel()
        with anyio.fail_after(5):
            await handler_cancelled.wait()


async def test_eof_ends_serve_fails_pending_requests_and_cancels_handlers() -> None:
    handler_cancelled = anyio.Event()
    failures: list[Exception] = []

    async def forever(params: dict[str, Any]) -> None:
        try:
            await anyio.sleep_forever()
        finally:
            handler_cancelled.set()

    async def ask(peer: Peer) -> None:
        try:
            await peer.request("fs/read_text_file", {"path": "/x"}, timeout=None)
        except ConnectionClosed as exc:
            failures.append(exc)

    with_forever = lambda peer: peer.on_request("forever", forever)  # noqa: E731
    async with serving(with_forever, eof_grace=0.1) as (peer, wire, served):
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "forever", "params": {}})
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, peer)
            assert (await wire.receive())["method"] == "fs/read_text_file"
            await wire.close()
            with anyio.fail_after(5):
                await served.wait()
    assert handler_cancelled.is_set()
    assert len(failures) == 1 and "connection closed" in str(failures[0])
    with pytest.raises(ConnectionClosed):
        await peer.request("fs/read_text_file", {}, timeout=1)


async def test_a_response_to_an_unknown_id_is_logged_and_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    async with serving(lambda peer: peer.on_request("echo", echo)) as (_, wire, _):
        await wire.send({"jsonrpc": "2.0", "id": 12345, "result": {}})
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {}})
        assert (await wire.receive())["id"] == 1
    assert "unknown or expired request id 12345" in caplog.text


async def test_a_late_answer_to_a_request_given_up_on_is_expected_not_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """E.g. `talaria run --acp` on Ctrl-C: the agent still answers the prompt it was running."""
    caplog.set_level(logging.DEBUG, logger="talaria.acp_server.jsonrpc")
    async with serving() as (peer, wire, _):
        with pytest.raises(RequestTimeout):  # given up on: timed out
            await peer.request("session/prompt", {}, timeout=0.1)
        timed_out = await wire.receive()
        assert (await wire.receive())["method"] == "$/cancel_request"
        async with anyio.create_task_group() as tg:  # given up on: cancelled
            tg.start_soon(partial(peer.request, "session/prompt", {}, timeout=None))
            asked = await wire.receive()
            tg.cancel_scope.cancel()
        assert (await wire.receive())["method"] == "$/cancel_request"
        for late in (timed_out, asked):
            await wire.send({"jsonrpc": "2.0", "id": late["id"], "result": {"stopReason": "cancelled"}})
        await wire.send({"jsonrpc": "2.0", "id": asked["id"], "result": {}})  # a second answer
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "nope", "params": {}})
        assert (await wire.receive())["id"] == 1  # both late answers were read before this
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == [f"response to an unknown or expired request id {asked['id']}"]
    assert caplog.text.count("late response to abandoned request") == 2


def test_abandoned_request_ids_are_bounded() -> None:
    read, write = os.pipe()
    try:
        peer = Peer(*fd_streams(read, write))
        for request_id in range(MAX_ABANDONED + 10):
            peer._abandon(request_id)
        assert len(peer._abandoned) == MAX_ABANDONED and 0 not in peer._abandoned
    finally:
        os.close(read)
        os.close(write)


# -- the ACP schema helper ------------------------------------------------------------------

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": 1,
        "clientCapabilities": {
            "fs": {"readTextFile": True, "writeTextFile": True},
            "terminal": True,
        },
    },
}
INITIALIZED = {
    "jsonrpc": "2.0",
    "id": 0,
    "result": {
        "protocolVersion": 1,
        "agentCapabilities": {"loadSession": True, "promptCapabilities": {"image": True}},
        "authMethods": [],
        "agentInfo": {"name": "talaria", "title": "Talaria", "version": "0.1.0"},
    },
}


def update(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s1", "update": body},
    }


def test_schema_accepts_a_good_transcript() -> None:
    rec = Recorder()
    rec.record("client->agent", json.dumps(INITIALIZE) + "\n")
    assert rec.unanswered() == {0: "initialize"}
    rec.record("agent->client", INITIALIZED)
    rec.record(
        "agent->client",
        update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}),
    )
    rec.record(
        "agent->client",
        update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "call_1",
                "title": "Read a.py",
                "kind": "read",
                "status": "pending",
                "locations": [{"path": "/p/a.py", "line": 3}],
                "rawInput": {"path": "a.py"},
            }
        ),
    )
    rec.record(
        "agent->client",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "fs/read_text_file",
            "params": {"sessionId": "s1", "path": "/p/a.py"},
        },
    )
    rec.record("client->agent", {"jsonrpc": "2.0", "id": 1, "result": {"content": "x = 1\n"}})
    rec.record(
        "client->agent",
        {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 5}},
    )
    rec.record(
        "agent->client",
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}},
    )
    rec.record(
        "agent->client",
        {"jsonrpc": "2.0", "method": "_talaria/anything", "params": {"free": "form"}},
    )
    assert rec.unanswered() == {}
    assert [u["sessionUpdate"] for u in rec.updates()] == ["agent_message_chunk", "tool_call"]
    assert len(rec.messages("client->agent")) == 3


@pytest.mark.parametrize(
    ("direction", "message", "complaint"),
    [
        (
            "agent->client",
            update({"sessionUpdate": "tool_call", "title": "Read", "kind": "read"}),
            "'toolCallId' is a required property",
        ),
        (
            "agent->client",
            update({"sessionUpdate": "tool_call", "toolCallId": "a", "title": "t", "kind": "look"}),
            "'look' is not one of ['read'",
        ),
        (
            "agent->client",
            update(
                {"sessionUpdate": "agent_message_chunk", "content": {"type": "txt", "text": "x"}}
            ),
            "content.type: 'txt' is not one of",
        ),
        (
            "agent->client",
            update({"sessionUpdate": "agent_said", "content": {}}),
            "unknown sessionUpdate 'agent_said'",
        ),
        (
            "agent->client",
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"update": {"sessionUpdate": "plan", "entries": []}},
            },
            "'sessionId' is a required property",
        ),
        (
            "agent->client",
            {"jsonrpc": "2.0", "id": 1, "method": "session/cancel", "params": {"sessionId": "s"}},
            "not an ACP v1 method that the client handles",
        ),
        (
            "client->agent",
            {"jsonrpc": "2.0", "id": 1, "method": "session/cancel", "params": {"sessionId": "s"}},
            "sent as a request, but ACP defines it as a notification",
        ),
        (
            "client->agent",
            {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"mcpServers": []}},
            "'cwd' is a required property",
        ),
        (
            "agent->client",
            {"jsonrpc": "2.0", "id": 1, "error": {"code": "bad", "message": "x"}},
            "error.code",
        ),
        (
            "agent->client",
            {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "x"}},
            "exactly one of result/error",
        ),
        ("agent->client", {"jsonrpc": "2.0", "id": 77, "result": {}}, "answers no pending request"),
        (
            "agent->client",
            {"id": 1, "method": "session/update", "params": {}},
            'jsonrpc must be "2.0"',
        ),
    ],
)
def test_schema_rejects_bad_messages(
    direction: Any, message: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(SchemaViolation) as caught:
        Recorder().record(direction, message)
    assert complaint in str(caught.value)


def test_schema_checks_a_result_against_the_method_of_its_request() -> None:
    rec = Recorder()
    rec.record(
        "client->agent",
        {
            "jsonrpc": "2.0",
            "id": "n",
            "method": "session/new",
            "params": {"cwd": "/p", "mcpServers": []},
        },
    )
    with pytest.raises(
        SchemaViolation, match="session/new result: 'sessionId' is a required property"
    ):
        rec.record("agent->client", {"jsonrpc": "2.0", "id": "n", "result": {"modes": None}})
    # CodeCompanion answers fs/write_text_file with null; the schema wants an object.
    rec.record(
        "agent->client",
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "fs/write_text_file",
            "params": {"sessionId": "s", "path": "/p/a", "content": ""},
        },
    )
    with pytest.raises(SchemaViolation, match="fs/write_text_file result"):
        validate_message(
            {"jsonrpc": "2.0", "id": 2, "result": None}, "client->agent", {2: "fs/write_text_file"}
        )


def test_schema_lines_must_be_single_line_utf8_json() -> None:
    with pytest.raises(SchemaViolation, match="one line"):
        parse_line('{"jsonrpc":\n"2.0"}\n')
    with pytest.raises(SchemaViolation, match="not UTF-8"):
        parse_line(b"\xff\n")
    assert parse_line(b'{"a":1}\n') == {"a": 1}
