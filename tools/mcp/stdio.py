"""The stdio transport: an MCP server as a child process, newline-delimited JSON-RPC on its
stdin/stdout, the MCP SDK's message types on our side.

Not the SDK's `stdio_client`, because the agent must know the child: it is spawned here in a
process group of its own, with the agent's marker in its environment and a record in
`talaria.tools.procs` (so nothing outlives the agent, even after `kill -9`), its stderr's
last lines are kept to say why it died, and `kill()` stops the whole group at once, from any
thread, when a session closes.

    server = await StdioServer.spawn(spec, cwd)      # the process starts now
    async with server.streams() as (read, write):    # an MCP `Transport` for `mcp.Client`
        ...
    server.kill()
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from talaria.tools import procs
from talaria.tools.mcp.settings import INHERITED_ENV, STDERR_LINES, STOP_GRACE_S, ServerSpec

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 64 * 1024 * 1024
"""A longer line from a server (without a newline) ends the connection."""
CHUNK = 1 << 16


class StdioServer:
    def __init__(self, spec: ServerSpec, process: anyio.abc.Process, record: procs.Record) -> None:
        self.spec = spec
        self.process = process
        self.pid = process.pid
        self.record = record
        self.stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self.killed = False
        """We sent it SIGKILL (a start timeout, a failure, the session closing)."""
        self.exited = anyio.Event()

    @classmethod
    async def spawn(cls, spec: ServerSpec, cwd: Path) -> StdioServer:
        """Start the server process; OSError when it cannot be started."""
        env = {k: v for k, v in os.environ.items() if k in INHERITED_ENV} | dict(spec.env)
        process = await anyio.open_process(
            [spec.command, *spec.args], env=procs.child_env(env), cwd=str(cwd),
            start_new_session=True,
        )
        return cls(spec, process, procs.track(process.pid, "mcp"))

    @property
    def ended_by_itself(self) -> bool:
        """It exited (or was signalled) by something other than our SIGKILL."""
        code = self.process.returncode
        return code is not None and not (self.killed and code == -signal.SIGKILL)

    def why(self) -> str:
        """How the process ended, with its last stderr line, for a notice."""
        code = self.process.returncode
        how = f"exited with status {code}" if code is not None and code >= 0 else \
            f"was killed by signal {-code}" if code is not None else "stopped answering"
        last = next((line for line in reversed(self.stderr) if line.strip()), "")
        return f"{how}" + (f" (stderr: {last[:300]})" if last else "")

    async def watch(self) -> None:
        """Drain stderr (a full pipe would block the server) and wait for the exit."""
        try:
            await self.drain()
        finally:  # exited, or the session closed (and killed it)
            self.kill()  # what it started dies with it
            self.record.close()

    async def drain(self) -> None:
        """Read stderr to its end, wait for the exit, set `exited`. Safe to call again after
        a cancelled call (the connection failed first): what was left is read then."""
        assert self.process.stderr is not None
        buffer = b""
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError,
                                 anyio.BrokenResourceError, OSError):
            async for chunk in self.process.stderr:
                lines = (buffer + chunk).split(b"\n")
                buffer = lines.pop()[-4096:]
                for line in lines:
                    text = line.decode("utf-8", "replace").rstrip()
                    self.stderr.append(text)
                    log.debug("mcp %s: %s", self.spec.name, text)
        if buffer.strip():
            self.stderr.append(buffer.decode("utf-8", "replace").rstrip())
        await self.process.wait()
        self.exited.set()

    @asynccontextmanager
    async def streams(self) -> AsyncIterator[tuple[Any, Any]]:
        """(read, write) memory streams of MCP `SessionMessage`s over the process's pipes."""
        import mcp_types
        from mcp.shared.message import SessionMessage

        read_in, read_out = anyio.create_memory_object_stream[Any](0)
        write_in, write_out = anyio.create_memory_object_stream[Any](0)
        process = self.process
        assert process.stdin is not None and process.stdout is not None

        async def reader() -> None:
            buffer = b""
            async with read_in:
                with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError,
                                         anyio.BrokenResourceError, OSError):
                    async for chunk in process.stdout:  # type: ignore[union-attr]
                        lines = (buffer + chunk).split(b"\n")
                        buffer = lines.pop()
                        if len(buffer) > MAX_LINE_BYTES:
                            log.warning("mcp %s: a line longer than %d bytes; disconnecting",
                                        self.spec.name, MAX_LINE_BYTES)
                            return
                        for line in lines:
                            if not line.strip():
                                continue
                            try:
                                message: Any = SessionMessage(
                                    mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
                            except ValueError as exc:  # not JSON-RPC: the session reports it
                                message = exc
                            await read_in.send(message)

        async def writer() -> None:
            async with write_out:
                with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    async for item in write_out:
                        data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                        await process.stdin.send(data.encode() + b"\n")  # type: ignore[union-attr]

        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            try:
                yield read_out, write_in
            finally:
                with anyio.CancelScope(shield=True):
                    await self.stop()
                tg.cancel_scope.cancel()

    async def stop(self) -> None:
        """Close stdin (the spec's polite way to stop), wait a moment, then kill the group."""
        with contextlib.suppress(Exception):
            await self.process.stdin.aclose()  # type: ignore[union-attr]
        with anyio.move_on_after(STOP_GRACE_S):
            await self.exited.wait()
        self.kill()

    def kill(self) -> None:
        """SIGKILL the server's process group (whatever it started too). Any thread; twice is fine."""
        self.killed = True
        with contextlib.suppress(OSError):
            os.killpg(self.pid, signal.SIGKILL)
