"""The JSON-RPC peer's lifecycle: cancellation both ways, timeouts, EOF, late answers."""

from __future__ import annotations

import logging
import os
from functools import partial
from typing import Any

import anyio
import pytest

from talaria.acp_server.jsonrpc import (
    MAX_ABANDONED,
    ConnectionClosed,
    Peer,
    RequestTimeout,
    RpcError,
    error_reason,
)
from talaria.acp_server.stdio import fd_streams
from tests.acp.jsonrpc_helpers import echo, serving, two_peers

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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
