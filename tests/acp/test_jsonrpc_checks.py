"""The peer with the ACP checks (`params.ACP_CHECKS`): wrong-typed params never reach a handler,
and a malformed answer fails only the request it answers (issue 23 item 8)."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest

from talaria.acp_server.jsonrpc import Peer, RpcError
from talaria.acp_server.params import ACP_CHECKS
from tests.acp.jsonrpc_helpers import serving

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def setup(seen: list[Any]) -> Any:
    def register(peer: Peer) -> None:
        async def handler(params: dict[str, Any]) -> dict[str, Any]:
            seen.append(params)
            return {}

        async def note(params: dict[str, Any]) -> None:
            seen.append(params)

        peer.on_request("session/set_mode", handler)
        peer.on_notification("session/cancel", note)

    return register


async def test_a_request_with_a_wrong_type_is_refused_before_its_handler() -> None:
    seen: list[Any] = []
    async with serving(setup(seen), checks=ACP_CHECKS) as (_, wire, _):
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "session/set_mode",
                         "params": {"sessionId": "s", "modeId": {"x": [1]}}})
        answer = await wire.receive()
        await wire.send({"jsonrpc": "2.0", "id": 2, "method": "session/set_mode",
                         "params": {"sessionId": "s", "modeId": "plan", "_meta": 5}})
        assert (await wire.receive())["result"] == {}
    assert answer["id"] == 1 and answer["error"]["code"] == -32602
    assert answer["error"]["data"] == "`modeId` must be a string, not an object"
    assert seen == [{"sessionId": "s", "modeId": "plan"}]  # a bad `_meta` counts as absent


async def test_a_notification_with_a_wrong_type_is_dropped_with_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    seen: list[Any] = []
    with caplog.at_level(logging.INFO):
        async with serving(setup(seen), checks=ACP_CHECKS) as (_, wire, _):
            for line in (b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":[1]}}',
                         b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":{}}}',
                         b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}'):
                await wire.send_raw(line + b"\n")
            await wire.send({"jsonrpc": "2.0", "id": 3, "method": "session/set_mode",
                             "params": {"sessionId": "s", "modeId": "plan"}})
            assert (await wire.receive())["id"] == 3  # nothing came before: no answers
    assert seen[0] == {"sessionId": "s"}
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        "ignoring notification 'session/cancel': `sessionId` must be a string, not an array",
        "ignoring notification '$/cancel_request': "
        "`requestId` must be a string, a 64-bit integer or null, not an object"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


@pytest.mark.parametrize(("answer", "reason"), [
    (b'{"jsonrpc":"2.0","id":%d,"result":{"content":[1]}}',
     "Malformed response: `content` must be a string, not an array"),
    (b'{"jsonrpc":"2.0","id":%d,"result":[]}',
     "Malformed response: the result must be an object, not an array"),
    (b'{"jsonrpc":"2.0","id":%d}', "Malformed response: it has neither `result` nor `error`"),
])
async def test_a_malformed_answer_fails_its_request_at_once(answer: bytes, reason: str) -> None:
    async with serving(checks=ACP_CHECKS) as (peer, wire, _), anyio.create_task_group() as tg:
        box: list[Any] = []

        async def ask() -> None:
            try:
                await peer.request("fs/read_text_file", {"path": "/x"}, timeout=None)
            except RpcError as exc:
                box.append(exc)

        tg.start_soon(ask)
        request = await wire.receive()
        await wire.send_raw(answer % request["id"] + b"\n")
        with anyio.fail_after(5):
            while not box:
                await anyio.sleep(0.01)
    assert box[0].message == reason


async def test_without_checks_a_result_is_passed_as_it_came() -> None:
    async with serving() as (peer, wire, _), anyio.create_task_group() as tg:
        box: list[Any] = []

        async def ask() -> None:
            box.append(await peer.request("fs/read_text_file", {}))

        tg.start_soon(ask)
        request = await wire.receive()
        await wire.send_raw(b'{"jsonrpc":"2.0","id":%d,"result":[1]}\n' % request["id"])
    assert box == [[1]]
