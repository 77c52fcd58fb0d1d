"""A small newline-delimited JSON-RPC 2.0 peer on anyio (the ACP transport).

One message per line, UTF-8, no batches. Both sides send requests (the editor calls
`session/prompt`, the agent calls `fs/read_text_file` while that prompt runs), so incoming
requests run concurrently, each in its own task, and responses are matched to requests by id.

    peer = Peer(reader, writer)
    peer.on_request("initialize", handle_initialize)      # async (params: dict) -> result
    peer.on_notification("session/cancel", handle_cancel)  # async (params: dict) -> None
    await peer.serve()                                      # returns when the reader hits EOF

A handler returns the `result` (any JSON value), or `Reply(result, then=...)` to run follow-up
work right after the response is written.

Exceptions:

    RpcError                a JSON-RPC error object: handlers raise it to answer with an error;
                            `request()` raises it when the other side answers with one
    PeerError               a request to the other side got no answer
     +-- RequestTimeout     (also a TimeoutError) nothing came back in time
     +-- ConnectionClosed   the stream ended or broke

Any other exception in a handler is answered with -32603 and a one-line reason; the traceback
goes to the log, never to the wire.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import sysconfig
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from talaria.tools.errors import TalariaError

log = logging.getLogger(__name__)

JsonObject = dict[str, Any]
RequestHandler = Callable[[JsonObject], Awaitable[Any]]
NotificationHandler = Callable[[JsonObject], Awaitable[None]]

DEFAULT_REQUEST_TIMEOUT = 60.0
"""Seconds `request()` waits by default: some clients never answer requests they don't know."""
MAX_LINE_BYTES = 256 * 1024 * 1024
"""Longest accepted line. A whole file travels in one `fs/read_text_file` reply."""
READ_CHUNK_BYTES = 1024 * 1024
MAX_ERROR_DATA_CHARS = 200
EOF_GRACE_SECONDS = 2.0
"""At EOF, handlers still running get this long to send their answers before being cancelled."""
CANCEL_REQUEST = "$/cancel_request"
MAX_ABANDONED = 1024
"""Ids of requests given up on (cancelled, timed out) whose late answers are expected."""


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
    def resource_not_found(cls, what: str | None = None) -> RpcError:
        return cls(-32002, "Resource not found", what)

    @classmethod
    def request_cancelled(cls) -> RpcError:
        return cls(-32800, "Request cancelled")

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


class PeerError(TalariaError):
    """A request to the other side did not get an answer."""


class RequestTimeout(PeerError, TimeoutError):
    """The other side did not answer in time."""


class ConnectionClosed(PeerError):
    """The stream ended (or broke) before the answer came."""


class _LineTooLong(Exception):
    pass


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
    ) -> None:
        self._reader, self._writer = reader, writer
        self._max_line_bytes, self._eof_grace = max_line_bytes, eof_grace
        self._requests: dict[str, RequestHandler] = {}
        self._notifications: dict[str, NotificationHandler] = {}
        self._waiting: dict[int, tuple[anyio.Event, list[JsonObject]]] = {}
        self._abandoned: dict[int, None] = {}  # insertion-ordered: the oldest goes first
        self._in_flight: dict[Any, anyio.CancelScope] = {}
        self._ids = itertools.count(1)
        self._write_lock = anyio.Lock()
        self._buf, self._pos = bytearray(), 0
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
        return box[0].get("result")

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
                    await self._dispatch_line(line, tg)
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
                return await self._read_line()
            except _LineTooLong:
                reason = f"line longer than {self._max_line_bytes} bytes"
                await self._send_error(None, RpcError.invalid_request(reason))

    async def _read_line(self) -> bytes | None:
        """The next line, without its newline; None at EOF. An overlong line is skipped."""
        buf, too_long, scanned = self._buf, False, self._pos
        while (newline := buf.find(b"\n", scanned)) < 0:
            if len(buf) - self._pos > self._max_line_bytes:
                del buf[:]
                self._pos, too_long = 0, True
            try:
                chunk = await self._reader.receive(READ_CHUNK_BYTES)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                rest = bytes(buf[self._pos :])
                del buf[:]
                self._pos = 0
                return None if too_long or not rest.strip() else rest
            del buf[: self._pos]  # compact once per chunk, not per line: many small lines stay O(n)
            self._pos, scanned = 0, len(buf)
            buf += chunk
        line, self._pos = bytes(buf[self._pos : newline]), newline + 1
        if too_long or len(line) > self._max_line_bytes:
            raise _LineTooLong
        return line

    async def _dispatch_line(self, line: bytes, tg: anyio.abc.TaskGroup) -> None:
        if not line.strip():
            return
        try:
            msg = json.loads(line)
        except ValueError as exc:  # also invalid UTF-8
            await self._send_error(None, RpcError.parse_error(_first_line(str(exc))))
            return
        if isinstance(msg, list):
            await self._send_error(None, RpcError.invalid_request("batches are not supported"))
        elif not isinstance(msg, dict):
            await self._send_error(None, RpcError.invalid_request("a message must be an object"))
        elif "method" not in msg and ("result" in msg or "error" in msg):
            self._on_response(msg)
        else:
            await self._on_call(msg, tg)

    def _on_response(self, msg: JsonObject) -> None:
        msg_id = msg.get("id")
        waiting = self._waiting.get(msg_id) if _valid_id(msg_id) else None
        if waiting is None:
            if _valid_id(msg_id) and msg_id in self._abandoned:  # e.g. a prompt after Ctrl-C
                del self._abandoned[msg_id]
                log.debug("late response to abandoned request id %r", msg_id)
            else:
                log.warning("response to an unknown or expired request id %r", msg_id)
            return
        done, box = waiting
        box.append(msg)
        done.set()

    async def _on_call(self, msg: JsonObject, tg: anyio.abc.TaskGroup) -> None:
        msg_id, method, params = msg.get("id"), msg.get("method"), msg.get("params", {})
        is_request = "id" in msg
        error = None
        if not _valid_id(msg_id):
            msg_id, error = None, RpcError.invalid_request("id must be a string, number or null")
        elif msg.get("jsonrpc") != "2.0":
            error = RpcError.invalid_request('jsonrpc must be "2.0"')
        elif not isinstance(method, str):
            error = RpcError.invalid_request("method must be a string")
        elif params is not None and not isinstance(params, dict):
            error = RpcError.invalid_params("params must be an object")
        if error is not None:
            await self._send_error(msg_id, error)
        elif not is_request:
            self._on_notification(method, params or {}, tg)
        elif method not in self._requests:
            await self._send_error(msg_id, RpcError.method_not_found(method))
        else:
            # Registered now, not when the task starts: a $/cancel_request or EOF may come first.
            scope = self._in_flight[msg_id] = anyio.CancelScope()
            self._spawn(tg, method, self._run_request, msg_id, method, params or {}, scope)

    def _on_notification(self, method: str, params: JsonObject, tg: anyio.abc.TaskGroup) -> None:
        if method == CANCEL_REQUEST:
            request_id = params.get("requestId")
            if _valid_id(request_id) and (scope := self._in_flight.get(request_id)):
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
        then = None
        try:
            with scope:
                result = await self._requests[method](params)
            if scope.cancelled_caught:  # by $/cancel_request; a handler may also return early
                raise RpcError.request_cancelled()
            if isinstance(result, Reply):
                result, then = result.result, result.then
            data = _encode({"jsonrpc": "2.0", "id": msg_id, "result": result})
        except RpcError as exc:
            data = _encode({"jsonrpc": "2.0", "id": msg_id, "error": exc.to_json()})
        except Exception as exc:
            log.exception("request %s failed", method)
            error = RpcError.internal(error_reason(exc)).to_json()
            data = _encode({"jsonrpc": "2.0", "id": msg_id, "error": error})
        finally:
            if self._in_flight.get(msg_id) is scope:
                del self._in_flight[msg_id]
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
        await self._send({"jsonrpc": "2.0", "id": msg_id, "error": error.to_json()})

    async def _send(self, msg: JsonObject) -> None:
        await self._write(_encode(msg))

    async def _write(self, data: bytes) -> None:
        async with self._write_lock:  # one whole line at a time, whatever the task
            if not self._writable:
                raise ConnectionClosed("connection closed")
            try:
                await self._writer.send(data)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
                self._writable = False
                raise ConnectionClosed(f"cannot write: {exc!r}") from exc


def _encode(msg: JsonObject) -> bytes:
    # allow_nan=False: NaN is not JSON and a strict client would reject the whole line.
    text = json.dumps(msg, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    # "replace": a lone surrogate (say, from an undecodable file name) must not kill the reply.
    return (text + "\n").encode("utf-8", "replace")


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, int | float | str) and not isinstance(value, bool))


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0][:MAX_ERROR_DATA_CHARS] if lines else ""


def _install_prefixes() -> list[str]:
    # Not sys.prefix: stripping "/usr/" would garble the user's own paths in messages.
    paths = {str(Path(__file__).resolve().parents[1])}
    paths.update(
        sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")
    )
    prefixes = {p.rstrip(os.sep) + os.sep for p in paths if p and len(p) > 1}
    return sorted(prefixes, key=len, reverse=True)  # longest first: site-packages before stdlib


_INSTALL_PREFIXES = _install_prefixes()


def error_reason(exc: BaseException) -> str:
    """`ClassName: first line of the message`, at most 200 chars, install paths stripped.

    Goes to the editor's user in a -32603 `data`: the agent's own file layout is not theirs.
    """
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    for prefix in _INSTALL_PREFIXES:
        text = text.replace(prefix, "")
    return _first_line(text)
