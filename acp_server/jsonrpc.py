"""A small newline-delimited JSON-RPC 2.0 peer on anyio (the ACP transport).

One message per line, UTF-8, no batches. Both sides send requests (the editor calls
`session/prompt`, the agent calls `fs/read_text_file` while that prompt runs), so incoming
requests run concurrently, each in its own task, and responses are matched to requests by id.

    peer = Peer(reader, writer)
    peer.on_request("initialize", handle_initialize)      # async (params: dict) -> result
    peer.on_notification("session/cancel", handle_cancel)  # async (params: dict) -> None
    await peer.serve()                                      # returns when the reader hits EOF

A handler returns the `result` (any JSON value), or `Reply(result, then=...)` to run follow-up
work right after the response is written. With `checks` (ACP: `params.ACP_CHECKS`), params are
checked before a handler sees them (-32602 for a request, dropped for a notification) and the
other side's answers before `request()` returns them.

Exceptions:

    RpcError                a JSON-RPC error object: handlers raise it to answer with an error;
                            `request()` raises it when the other side answers with one
    PeerError               a request to the other side got no answer
     +-- RequestTimeout     (also a TimeoutError) nothing came back in time
     +-- ConnectionClosed   the stream ended or broke

Any other exception in a handler is answered with -32603 and a one-line reason; the traceback
goes to the log, never to the wire.

Error codes, and how every kind of hostile line is answered: `talaria.acp_server.wire`.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import anyio
import anyio.abc

from talaria.acp_server import wire
from talaria.acp_server.lines import LineReader, LineTooLong
from talaria.acp_server.wire import MODEL_ERROR, NO_CHECKS, Checks, RpcError, error_reason
from talaria.tools.errors import TalariaError

__all__ = ["MODEL_ERROR", "Checks", "ConnectionClosed", "Peer", "PeerError", "Reply",
           "RequestTimeout", "RpcError", "error_reason"]

log = logging.getLogger(__name__)

JsonObject = dict[str, Any]
RequestHandler = Callable[[JsonObject], Awaitable[Any]]
NotificationHandler = Callable[[JsonObject], Awaitable[None]]

DEFAULT_REQUEST_TIMEOUT = 60.0
"""Seconds `request()` waits by default: some clients never answer requests they don't know."""
MAX_LINE_BYTES = 256 * 1024 * 1024
"""Longest accepted line. A whole file travels in one `fs/read_text_file` reply."""
CHECK_IN_THREAD_BYTES = 1024 * 1024
"""Lines longer than this are checked for bad strings and deep nesting in a worker thread."""
EOF_GRACE_SECONDS = 2.0
"""At EOF, handlers still running get this long to send their answers before being cancelled."""
CANCEL_REQUEST = "$/cancel_request"
MAX_ABANDONED = 1024
"""Ids of requests given up on (cancelled, timed out) whose late answers are expected."""


class PeerError(TalariaError):
    """A request to the other side did not get an answer."""


class RequestTimeout(PeerError, TimeoutError):
    """The other side did not answer in time."""


class ConnectionClosed(PeerError):
    """The stream ended (or broke) before the answer came."""


@dataclass(frozen=True, slots=True)
class Reply:
    """A handler's result plus work to run once the response is on the wire.

    ACP wants some notifications *after* a response: `available_commands_update` follows the
    `session/new` answer. `then` runs in the handler's task; its errors are logged.
    """

    result: Any
    then: Callable[[], Awaitable[None]] | None = None


class Peer:
    """One end of a newline-delimited JSON-RPC 2.0 connection."""

    def __init__(
        self,
        reader: anyio.abc.ByteReceiveStream,
        writer: anyio.abc.ByteSendStream,
        *,
        max_line_bytes: int = MAX_LINE_BYTES,
        eof_grace: float = EOF_GRACE_SECONDS,
        checks: Checks = NO_CHECKS,
    ) -> None:
        self._reader, self._writer = reader, writer
        self._checks = checks
        self._max_line_bytes, self._eof_grace = max_line_bytes, eof_grace
        self._requests: dict[str, RequestHandler] = {}
        self._notifications: dict[str, NotificationHandler] = {}
        self._waiting: dict[int, tuple[anyio.Event, list[JsonObject]]] = {}
        self._abandoned: dict[int, None] = {}  # insertion-ordered: the oldest goes first
        self._in_flight: dict[Any, anyio.CancelScope] = {}
        self._ids = itertools.count(1)
        # Uncontended, taking it does not yield to the loop: one loop pass less per message.
        self._write_lock = anyio.Lock(fast_acquire=True)
        self._lines = LineReader(reader, max_line_bytes)
        self.closed = False  # True once the input ended: no response can arrive any more
        self._writable = True
        self._running = 0  # handler tasks alive
        self._drained: anyio.Event | None = None  # set when the last handler ends after EOF

    def on_request(self, method: str, handler: RequestHandler) -> None:
        """Answer `method` with `await handler(params)`; raise `RpcError` to answer an error."""
        self._requests[method] = handler

    def on_notification(self, method: str, handler: NotificationHandler) -> None:
        self._notifications[method] = handler

    async def request(
        self,
        method: str,
        params: JsonObject | None = None,
        *,
        timeout: float | None = DEFAULT_REQUEST_TIMEOUT,
    ) -> Any:
        """Call `method` on the other side and return its `result`.

        Raises `RpcError` (error answer), `RequestTimeout` (no answer within `timeout` seconds;
        None waits forever) or `ConnectionClosed`. On timeout or cancellation the other side
        is sent a `$/cancel_request`.
        """
        if self.closed:
            raise ConnectionClosed(f"{method}: connection closed")
        request_id = next(self._ids)
        done, box = self._waiting[request_id] = (anyio.Event(), [])
        try:
            await self._send(
                {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}
            )
            with anyio.fail_after(timeout):
                await done.wait()
        except TimeoutError:
            self._abandon(request_id)
            await self._cancel_remote(request_id)
            raise RequestTimeout(f"{method}: no response within {timeout:g} s") from None
        except anyio.get_cancelled_exc_class():
            self._abandon(request_id)
            with anyio.CancelScope(shield=True):
                await self._cancel_remote(request_id)
            raise
        finally:
            del self._waiting[request_id]
        if not box:
            raise ConnectionClosed(f"{method}: connection closed before the response")
        if "error" in box[0]:
            raise RpcError.from_json(box[0]["error"])
        if "result" not in box[0]:
            raise RpcError.malformed_answer("it has neither `result` nor `error`")
        return self._checks.result(method, box[0]["result"])

    def _abandon(self, request_id: int) -> None:
        """Remember a request given up on: its answer may still come, and is no anomaly."""
        self._abandoned[request_id] = None
        if len(self._abandoned) > MAX_ABANDONED:
            del self._abandoned[next(iter(self._abandoned))]

    async def notify(self, method: str, params: JsonObject | None = None) -> None:
        await self._send({"jsonrpc": "2.0", "method": method, "params": params or {}})

    async def serve(self) -> None:
        """Read and dispatch messages until EOF, then return.

        At EOF, pending `request()`s fail with `ConnectionClosed` at once; handlers still running
        get `eof_grace` seconds to answer (`echo '{...}' | talaria acp` must print the answer),
        then are cancelled.
        """
        async with anyio.create_task_group() as tg:
            try:
                while (line := await self._next_line()) is not None:
                    try:
                        await self._dispatch_line(line, tg)
                    except ConnectionClosed:
                        log.info("cannot answer: the output is closed")
                    except Exception:  # a bug here must cost one line, not the connection
                        log.exception("could not handle an incoming line (%d bytes)", len(line))
                self._end_input()
                self._drained = anyio.Event()
                with anyio.move_on_after(self._eof_grace):
                    if self._running:
                        await self._drained.wait()
            finally:
                self._end_input()
                self._writable = False
                tg.cancel_scope.cancel()

    def _end_input(self) -> None:
        self.closed = True
        for done, _ in self._waiting.values():
            done.set()

    # -- reading ------------------------------------------------------------------------

    async def _next_line(self) -> bytes | None:
        while True:
            try:
                return await self._lines.next()
            except LineTooLong:
                reason = f"line longer than {self._max_line_bytes} bytes"
                await self._send_error(None, RpcError.invalid_request(reason))

    async def _dispatch_line(self, line: bytes, tg: anyio.abc.TaskGroup) -> None:
        if not line.strip():
            return
        try:
            msg, suspect = wire.decode_line(line)
        except ValueError as exc:
            await self._send_error(None, RpcError.parse_error(str(exc)))
            return
        if isinstance(msg, list):
            await self._send_error(None, RpcError.invalid_request("batches are not supported"))
        elif not isinstance(msg, dict):
            await self._send_error(None, RpcError.invalid_request("a message must be an object"))
        elif "method" not in msg and ("result" in msg or "error" in msg or self._awaited(msg)):
            if suspect:  # an answer cannot be refused: its unencodable strings are mended
                msg = wire.repaired(msg)
            self._on_response(msg)
        else:
            problem = await self._problem(msg.get("params"), len(line)) if suspect else None
            await self._on_call(msg, problem, tg)

    async def _problem(self, params: Any, size: int) -> str | None:
        if size > CHECK_IN_THREAD_BYTES:  # pure Python: a thread lets the loop go on meanwhile
            return await anyio.to_thread.run_sync(wire.problem, params, "params")
        return wire.problem(params, "params")

    def _awaited(self, msg: JsonObject) -> bool:
        """Whether `msg` (no method, no result, no error) has the id of a request we wait on:
        a malformed answer, which fails that request at once rather than at its timeout."""
        msg_id = msg.get("id")
        return isinstance(msg_id, int) and not isinstance(msg_id, bool) and msg_id in self._waiting

    def _on_response(self, msg: JsonObject) -> None:
        msg_id = msg.get("id")
        # Our ids are ints; `true` is not 1.
        ours = msg_id if isinstance(msg_id, int) and not isinstance(msg_id, bool) else None
        waiting = self._waiting.get(ours) if ours is not None else None
        if waiting is None:
            if ours is not None and ours in self._abandoned:  # e.g. a prompt after Ctrl-C
                del self._abandoned[ours]
                log.debug("late response to abandoned request id %r", msg_id)
            else:
                log.warning("response to an unknown or expired request id %r", msg_id)
            return
        done, box = waiting
        box.append(msg)
        done.set()

    async def _on_call(
        self, msg: JsonObject, problem: str | None, tg: anyio.abc.TaskGroup
    ) -> None:
        """A request or a notification; `problem` is what `wire.problem` found in its params.
        A notification (JSON-RPC 2.0, 4.1: no `id`, `jsonrpc` "2.0", a string `method`) is never
        answered, even with bad params; a line without `id` that is not one is an invalid request."""
        msg_id, method, params = msg.get("id"), msg.get("method"), msg.get("params", {})
        error = None
        if not wire.valid_id(msg_id):
            msg_id, error = None, RpcError.invalid_request(
                "id must be a string, an integer (64-bit) or null"
            )
        elif msg.get("jsonrpc") != "2.0":
            error = RpcError.invalid_request('jsonrpc must be "2.0"')
        elif not isinstance(method, str):
            error = RpcError.invalid_request("method must be a string")
        elif "id" in msg and method not in self._requests:
            error = RpcError.method_not_found(method)
        elif params is not None and not isinstance(params, dict):
            error = RpcError.invalid_params("params must be an object")
        elif problem is not None:
            error = RpcError.invalid_params(problem)
        else:
            try:
                params = self._checks.params(method, params or {})
            except RpcError as exc:
                error = exc
        notification = "id" not in msg and isinstance(method, str) and msg.get("jsonrpc") == "2.0"
        if notification:  # never answered (JSON-RPC 2.0), whatever is wrong with its params
            if error is None:
                self._on_notification(cast(str, method), params or {}, tg)
            else:
                log.warning("ignoring notification %.100r: %s", method, error.data)
        elif error is not None:
            await self._send_error(msg_id, error)
        else:
            # Registered now, not when the task starts: a $/cancel_request or EOF may come first.
            scope = self._in_flight[msg_id] = anyio.CancelScope()
            name = cast(str, method)  # checked above
            self._spawn(tg, name, self._run_request, msg_id, name, params or {}, scope)

    def _on_notification(self, method: str, params: JsonObject, tg: anyio.abc.TaskGroup) -> None:
        if method == CANCEL_REQUEST:
            request_id = params.get("requestId")
            if wire.valid_id(request_id) and (scope := self._in_flight.get(request_id)):
                scope.cancel()
        elif (handler := self._notifications.get(method)) is not None:
            self._spawn(tg, method, self._run_notification, method, handler, params)
        else:
            log.debug("ignoring unknown notification %s", method)

    # -- handlers -----------------------------------------------------------------------

    def _spawn(
        self, tg: anyio.abc.TaskGroup, method: str, func: Callable[..., Awaitable[None]], *args: Any
    ) -> None:
        """Run a handler in its own task, counted so that EOF can wait for it."""
        self._running += 1

        async def run() -> None:
            try:
                await func(*args)
            finally:
                self._running -= 1
                if not self._running and self._drained is not None:
                    self._drained.set()

        tg.start_soon(run, name=f"rpc {method}")

    async def _run_request(
        self, msg_id: Any, method: str, params: JsonObject, scope: anyio.CancelScope
    ) -> None:
        then: Callable[[], Awaitable[None]] | None = None
        try:
            with scope:
                result = await self._requests[method](params)
            if scope.cancelled_caught:  # by $/cancel_request; a handler may also return early
                raise RpcError.request_cancelled()
            if isinstance(result, Reply):
                result, then = result.result, result.then
            answer: JsonObject = {"result": result}
        except RpcError as exc:
            answer = {"error": exc.to_json()}
        except Exception as exc:
            log.exception("request %s failed", method)
            answer = {"error": RpcError.internal(error_reason(exc)).to_json()}
        finally:
            if self._in_flight.get(msg_id) is scope:
                del self._in_flight[msg_id]
        data = wire.answer_line(msg_id, method, answer)
        try:
            await self._write(data)
            if then is not None:
                await then()
        except ConnectionClosed:
            log.info("could not answer %s: connection closed", method)
        except Exception:
            log.exception("follow-up of %s failed", method)

    async def _run_notification(
        self, method: str, handler: NotificationHandler, params: JsonObject
    ) -> None:
        try:
            await handler(params)
        except Exception:
            log.exception("notification %s failed", method)

    # -- writing ------------------------------------------------------------------------

    async def _cancel_remote(self, request_id: int) -> None:
        with contextlib.suppress(ConnectionClosed):
            await self.notify(CANCEL_REQUEST, {"requestId": request_id})

    async def _send_error(self, msg_id: Any, error: RpcError) -> None:
        await self._write(wire.answer_line(msg_id, "", {"error": error.to_json()}))

    async def _send(self, msg: JsonObject) -> None:
        await self._write(wire.encode(msg))

    async def _write(self, data: bytes) -> None:
        async with self._write_lock:  # one whole line at a time, whatever the task
            if not self._writable:
                raise ConnectionClosed("connection closed")
            try:
                await self._writer.send(data)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
                self._writable = False
                raise ConnectionClosed(f"cannot write: {exc!r}") from exc
