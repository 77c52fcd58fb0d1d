"""One MCP server's life in a session, run on the MCP thread's event loop (see manager.py).

`run()` starts the server (spawn or connect), does the MCP handshake with the official SDK's
`mcp.Client`, lists its tools, resources and prompts, marks it ready and holds the connection
open until `stop()` or until the server goes away. A start that takes longer than
`start_timeout` is given up. `call()` and friends are used while it is ready; a call that is
running when the server dies fails at once, saying how it died.
When the server says its tools changed (a `subscriptions/listen` event on the 2026 protocol,
`notifications/tools/list_changed` before it), they are listed again.

What other threads read (`status`, `tools`, `error`) is only ever replaced whole, never
mutated in place.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from talaria.tools.errors import McpError
from talaria.tools.mcp.settings import MAX_TOOLS, ServerSpec
from talaria.tools.mcp.stdio import StdioServer

log = logging.getLogger(__name__)

HTTP_TIMEOUT_S = 30.0
HTTP_READ_TIMEOUT_S = 300.0
EXIT_WAIT_S = 0.2
"""When the connection breaks, how long to wait for the process's exit status (the notice
says how it ended)."""
SETTLE_S = 2.0
"""After a server died mid-call, how long the call waits for the session to take note."""
MAX_PAGES = 20
"""Pages of a paginated list read from one server."""
CONNECT_MODE = "auto"
"""The SDK's protocol negotiation: the 2026 protocol when the server has it, else the
initialize handshake (tests force "legacy" to check the older servers' path)."""


def _import_sdk() -> None:
    import mcp.client.client  # noqa: F401  (~0.7 s: done on a worker thread)


@dataclass(frozen=True, slots=True)
class Listing:
    """What a ready server offers."""

    tools: tuple[Any, ...] = ()
    """`mcp_types.Tool`s (at most MAX_TOOLS)."""
    resources: bool = False
    prompts: tuple[Any, ...] = ()


@dataclass(slots=True)
class Connection:
    spec: ServerSpec
    cwd: Path
    start_timeout: float
    call_timeout: float
    on_change: Callable[[Connection, str, str], None]
    """Told of every status change (the previous status, the new one), on the MCP thread,
    before `status` shows it: a reader on another thread who sees "ready" sees its tools."""
    status: str = "new"
    """new, starting, ready, failed or stopped."""
    error: str = ""
    """Why it failed, for notices."""
    listing: Listing = field(default_factory=Listing)
    failures: int = 0
    retry_at: float = 0.0
    hopeless: bool = False
    """Failed in a way a restart cannot mend (its command does not exist): not restarted."""
    stdio: StdioServer | None = None
    _client: Any = None
    _stop: anyio.Event | None = None
    _down: anyio.Event | None = None

    def _set(self, status: str, error: str = "") -> None:
        before, self.error = self.status, error
        self.on_change(self, before, status)
        self.status = status

    async def run(self) -> None:
        """Start, serve until stopped or gone, and say why it ended."""
        self._stop, self._down = anyio.Event(), anyio.Event()
        self._set("starting")
        reason = ""
        try:
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._deadline, scope)
                    await self._serve(tg)
                    tg.cancel_scope.cancel()
            if self.status == "starting" and scope.cancelled_caught:
                reason = f"did not start within {self.start_timeout:g} s"
        except Exception as exc:  # whatever the SDK or the server did: one line for the user
            reason = describe(exc)
            self.hopeless = not_found(exc)
            log.debug("mcp %s failed", self.spec.name, exc_info=True)
        finally:
            self._client = None
            if self.stdio is not None:
                if not (self._stop.is_set() or self.stdio.exited.is_set()):
                    # A closed pipe is often seen before the exit, and the failure cancelled
                    # the watcher: read what the server said last and wait for its end here.
                    with anyio.move_on_after(EXIT_WAIT_S, shield=True):
                        await self.stdio.drain()
                if self.stdio.exited.is_set() and not self._stop.is_set() and self.stdio.ended_by_itself:
                    reason = self.stdio.why()  # how it died says more than what broke after
                self.stdio.kill()
            # The status (and so the notice) first: a call that failed with the server waits
            # for `_down`, so the user hears of it before the model's next call.
            if self._stop.is_set():
                self._set("stopped")
            else:
                self._set("failed", reason or "the connection closed")
            self._down.set()

    async def _deadline(self, scope: anyio.CancelScope) -> None:
        await anyio.sleep(self.start_timeout)
        if self.status == "starting":
            scope.cancel()

    async def _serve(self, tg: anyio.abc.TaskGroup) -> None:
        async with AsyncExitStack() as stack:
            if self.spec.transport == "stdio":
                self.stdio = stdio = await StdioServer.spawn(self.spec, self.cwd)
                tg.start_soon(stdio.watch)
                tg.start_soon(self._on_exit, stdio, tg.cancel_scope)
            await anyio.to_thread.run_sync(_import_sdk)  # the server boots meanwhile
            from mcp import Client
            from mcp_types import Implementation

            transport = await self._transport(stack)

            async def on_message(message: Any) -> None:  # servers of the handshake era
                # Not awaited here: listing from inside the client's receive loop would wait
                # on an answer that loop has to deliver.
                if type(message).__name__ == "ToolListChangedNotification":
                    tg.start_soon(self._relist)

            client = await stack.enter_async_context(Client(
                transport, mode=CONNECT_MODE, cache=None, message_handler=on_message,
                client_info=Implementation(name="talaria", version="0.1.0")))
            self.listing = await _list(client)
            self._client = client
            self._set("ready")
            tools = client.server_capabilities.tools
            if tools is not None and tools.list_changed:
                tg.start_soon(self._listen, client)
            assert self._stop is not None
            await self._stop.wait()

    async def _listen(self, client: Any) -> None:
        """Servers of the 2026 protocol announce changes on a `subscriptions/listen` stream
        (older ones send a notification: `on_message`)."""
        from mcp.client.subscriptions import ListenNotSupportedError

        try:
            async with client.listen(tools_list_changed=True) as events:
                async for _ in events:
                    await self._relist()
        except ListenNotSupportedError:
            return
        except Exception as exc:  # the stream dropped: the tools stay as they are
            log.info("mcp %s: change events stopped: %s", self.spec.name, describe(exc))

    async def _relist(self) -> None:
        """The server said its tools changed: list them again; they are offered from the
        next model call (a failed listing keeps the old tools)."""
        client = self._client
        if client is None or self.status != "ready":
            return
        try:
            with anyio.fail_after(self.call_timeout):
                listing = await _list(client)
        except Exception as exc:
            log.warning("mcp %s: listing its changed tools failed: %s", self.spec.name, describe(exc))
            return
        if self._client is client and self.status == "ready":
            self.listing = listing
            self._set("ready")  # the manager rebuilds the server's tools

    async def _on_exit(self, stdio: StdioServer, scope: anyio.CancelScope) -> None:
        await stdio.exited.wait()
        scope.cancel()  # the connection is over: leave it, calls in flight fail

    async def _transport(self, stack: AsyncExitStack) -> Any:
        if self.stdio is not None:
            return self.stdio.streams()
        import httpx2

        headers = dict(self.spec.headers)
        if self.spec.transport == "sse":
            from mcp.client.sse import sse_client

            return sse_client(self.spec.url, headers=headers, timeout=HTTP_TIMEOUT_S,
                              sse_read_timeout=HTTP_READ_TIMEOUT_S)
        from mcp.client.streamable_http import streamable_http_client

        http = await stack.enter_async_context(httpx2.AsyncClient(
            headers=headers, timeout=httpx2.Timeout(HTTP_TIMEOUT_S, read=HTTP_READ_TIMEOUT_S)))
        return streamable_http_client(self.spec.url, http_client=http)

    def stop(self) -> None:
        """Ask `run` to end (on the MCP loop)."""
        if self._stop is not None:
            self._stop.set()
        if self.stdio is not None:
            self.stdio.kill()

    async def request(self, what: str, send: Callable[[Any], Any]) -> Any:
        """`await send(client)` while the server is up: McpError when it is not, when it dies
        meanwhile, or after `call_timeout`."""
        client, down = self._client, self._down
        if client is None or down is None or self.status != "ready":
            raise McpError(f"MCP server {self.spec.name!r} is not running"
                           + (f" ({self.error})" if self.error else ""))
        outcome: list[Any] = []
        error = ""
        async with anyio.create_task_group() as tg:
            async def watch() -> None:
                await down.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            try:
                with anyio.fail_after(self.call_timeout):
                    outcome.append(await send(client))
            except TimeoutError:
                error = f"{what} timed out after {self.call_timeout:g} s"
            except Exception as exc:  # the server's error, a broken pipe, a bad answer
                error = f"{what} failed: {describe(exc)}"
            tg.cancel_scope.cancel()
        if outcome:
            return outcome[0]
        if self.stdio is not None:  # a broken pipe is often seen before the exit
            with anyio.move_on_after(EXIT_WAIT_S):
                await self.stdio.exited.wait()
            if self.stdio.exited.is_set():
                with anyio.move_on_after(SETTLE_S):
                    await down.wait()  # `run` has marked it failed: its notice is queued
                raise McpError(f"MCP server {self.spec.name!r} {self.stdio.why()} during {what}")
        if down.is_set() and not error:
            error = f"MCP server {self.spec.name!r} stopped during {what}"
        raise McpError(error)


async def _list(client: Any) -> Listing:
    caps = client.server_capabilities
    tools: list[Any] = []
    if caps.tools is not None:
        cursor = None
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools += page.tools
            cursor = page.next_cursor
            if cursor is None or len(tools) >= MAX_TOOLS:
                break
    prompts: list[Any] = []
    if caps.prompts is not None:
        prompts = list((await client.list_prompts()).prompts)
    return Listing(tuple(tools[:MAX_TOOLS]), caps.resources is not None, tuple(prompts))


def not_found(exc: BaseException) -> bool:
    """Whether the innermost error is a command that does not exist (spawning it failed)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return isinstance(exc, FileNotFoundError | PermissionError | NotADirectoryError)


def describe(exc: BaseException) -> str:
    """One line about a failure: the innermost real error of an exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__
