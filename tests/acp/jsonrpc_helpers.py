"""Two JSON-RPC peers over real OS pipes, for the peer's tests."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio

from talaria.acp_server.jsonrpc import (
    Peer,
)
from talaria.acp_server.stdio import fd_streams


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
