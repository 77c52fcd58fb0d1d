"""The bounded, resyncing frame reader every byte of `talaria lsp`'s stdin goes through.

pygls reads what this reader hands it (`readline` / `read`, the interface `start_io` takes),
and this reader hands it only well-formed frames, rewritten as `Content-Length: N\\r\\n\\r\\n`
then N bytes of one JSON object. What comes in is read as

    Content-Length: N          exactly once (or repeated with the same N), N decimal digits
    Any-Header: value          at most MAX_HEADERS lines of at most MAX_HEADER_LINE_BYTES
                               (a name of token characters, a colon, a value)
    (an empty line)            the end of the headers; `\\r\\n` or `\\n` line ends both read
    N bytes                    one JSON object nested at most MAX_DEPTH deep

and anything else is answered and skipped, never waited on (pygls would wait forever for a
header it can read, or read a 100 GB length at once):

- a header block that cannot be read (a line without a colon or with a bad name, a line or
  block over the bounds, no Content-Length, one that is not a number, two that differ):
  -32700 with id null (once per stretch of such bytes), then every byte up to the next
  `Content-Length:` is skipped (resync): from the second byte of a line that is not a header
  (the next frame may be glued to the end of the rest of a body longer than its length said),
  from a `Content-Length:` that began mid-line in a block, else from the end of the block;
- a body over MAX_FRAME_BYTES: skipped exactly (read and dropped, never held); a request whose
  id shows in its first PEEK_BYTES gets -32600 with that id, anything else a
  `window/showMessage` saying what was dropped (a notification is never answered);
- a length over MAX_SKIP_BYTES: no stream that long is sent, so the frames cannot be found
  again: `FramingLost` (`talaria lsp` says so on one stderr line and exits 1);
- a body that is not JSON: -32700 with id null; JSON that is not an object, or nested too
  deep: -32600 (with its id when it has one).
"""

from __future__ import annotations

import json
import re
import threading
from typing import IO, Any

MAX_FRAME_BYTES = 256 * 1024 * 1024
"""Largest body read (as `talaria acp`'s line bound): a whole file in a `didOpen` fits."""
MAX_SKIP_BYTES = 1024 * 1024 * 1024
"""Largest declared length skipped to find the next frame; over it, the stream is given up."""
MAX_HEADER_LINE_BYTES = 8 * 1024
"""Longest header line (LSP sends `Content-Length: N` and maybe a Content-Type)."""
MAX_HEADERS = 16
"""Header lines in one frame."""
MAX_DEPTH = 200
"""Deepest nesting of a body (LSP messages nest about 10 deep); deeper would only exhaust
the stack of the code that converts it (pygls' cattrs)."""
PEEK_BYTES = 64 * 1024
"""Bytes of a too-large body searched for its request id."""
READ_CHUNK_BYTES = 1024 * 1024
PARSE_ERROR, INVALID_REQUEST = -32700, -32600
FORMAT = "send `Content-Length: N\\r\\n\\r\\n` and then N bytes of JSON"

_NAME = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_DIGITS = re.compile(rb"[0-9]+")
_MAX_DIGITS = 19
_RESYNC = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)
_WS = re.compile(r"[ \t\n\r]*")


class FramingLost(Exception):
    """The stream cannot be read as frames any more (the message says why, in one line)."""


class Output:
    """The protocol's stdout: whole frames, one writer at a time (pygls writes from the event
    loop, the reader its error replies from pygls' reading thread)."""

    def __init__(self, stdout: IO[bytes]) -> None:
        self._out = stdout
        self._lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self._lock:
            self._out.write(data)
            self._out.flush()

    def flush(self) -> None:
        """Each write is flushed already (pygls' writer calls this after each)."""

    def close(self) -> None:
        with self._lock:
            self._out.close()

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        self.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


class FrameReader:
    """Frames from `stdin`; errors answered on `out`. `message()` reads the next good one."""

    def __init__(self, stdin: IO[bytes], out: Output, *, max_frame: int = MAX_FRAME_BYTES,
                 max_skip: int = MAX_SKIP_BYTES) -> None:
        self._in, self._out = stdin, out
        self.max_frame, self.max_skip = max_frame, max_skip
        self._buf = bytearray()
        self._eof = False
        self._lines: list[bytes] = []
        self._body = b""
        self._pending: dict[str, Any] | None = None
        self._line_end = 0
        self._garbage = False
        """Skipping bytes that are not frames (answered once, when the stretch began)."""

    # -- what pygls reads ------------------------------------------------------------------

    def readline(self) -> bytes:
        if not self._lines and self.message() is None:
            return b""
        self._pending = None
        return self._lines.pop(0)

    def read(self, size: int) -> bytes:
        body, self._body = self._body[:size], self._body[size:]
        return body

    # -- frames ----------------------------------------------------------------------------

    def message(self) -> dict[str, Any] | None:
        """The next frame's message (kept for pygls to read), None at end of input."""
        if self._pending is not None or self._lines:
            return self._pending
        while True:
            body = self._next_body()
            if body is None:
                return None
            message = self._parse(body)
            if message is not None:
                self._lines = [b"Content-Length: %d\r\n" % len(body), b"\r\n"]
                self._body, self._pending, self._garbage = body, message, False
                return message

    def _next_body(self) -> bytes | None:
        """The next frame's body, answering and skipping what is not a frame."""
        while True:
            try:
                length = self._headers()
            except _BadHeader as exc:
                if not self._garbage:  # once per stretch of garbage, not once per line of it
                    self._reply(None, PARSE_ERROR, f"unreadable frame header ({exc}): skipped "
                                                    f"to the next Content-Length; {FORMAT}")
                self._garbage = True
                if not self._resync(1 if exc.in_line else 0):
                    return None
                continue
            if length is None:
                return None
            if length > self.max_frame:
                self._skip(length)
                continue
            while len(self._buf) < length and self._fill():
                pass
            if len(self._buf) < length:
                return None  # the editor went away in the middle of a frame
            body = bytes(self._buf[:length])
            del self._buf[:length]
            return body

    def _headers(self) -> int | None:
        """The Content-Length of the next header block (None at end of input)."""
        block = bytearray()
        try:
            return self._header_block(block)
        except _BadHeader as exc:
            if not exc.in_line and (glued := _glued(block)) >= 0:
                # A header that began mid-line (after garbage with no line end of its own):
                # the frame it starts is read again from there.
                self._buf[:0] = block[glued:]
            raise

    def _header_block(self, block: bytearray) -> int | None:
        lengths: set[bytes] = set()
        count = 0
        while (line := self._line()) is not None:
            if not line.strip():
                block += self._buf[:self._line_end]
                self._consume_line()
                if not count:
                    continue  # blank lines between frames: read past them
                if not lengths:
                    raise _BadHeader("no Content-Length")
                if len(lengths) > 1 and len(counts := {v for v in lengths if _DIGITS.fullmatch(v)}) == 1:
                    # A broken Content-Length line glued before a good header (the fuzz's
                    # `Content-Length: %d` then a real frame): the byte count is the frame's.
                    lengths = counts
                if len(lengths) > 1:
                    raise _BadHeader("two different Content-Length values")
                digits = lengths.pop()
                if not _DIGITS.fullmatch(digits):
                    raise _BadHeader(f"Content-Length {_shown(digits)} is not a byte count")
                if len(digits) > _MAX_DIGITS:  # no int of 8 KiB of digits: no such stream
                    raise self._lost(f"a length of {len(digits)} digits")
                return int(digits)
            count += 1
            if count > MAX_HEADERS:
                raise _BadHeader(f"more than {MAX_HEADERS} header lines")
            name, colon, value = line.partition(b":")
            if not colon or not _NAME.fullmatch(name):
                # Not consumed: the next frame's header may be glued to the end of this line
                # (the rest of a body longer than its Content-Length said).
                raise _BadHeader(f"{_shown(line)} is not a `Name: value` header line", in_line=True)
            block += self._buf[:self._line_end]
            self._consume_line()
            if name.lower() == b"content-length":
                lengths.add(value.strip())
        return None

    def _line(self) -> bytes | None:
        """The next line (left in the buffer), without its line end; None at end of input.
        Raises _BadHeader (in_line) for a line over MAX_HEADER_LINE_BYTES (its end not counted)."""
        window = MAX_HEADER_LINE_BYTES + 2  # room for the line's own \r\n
        while (newline := self._buf.find(b"\n", 0, window)) < 0:
            if len(self._buf) >= window:
                raise _BadHeader(f"a header line over {MAX_HEADER_LINE_BYTES} bytes", in_line=True)
            if not self._fill():
                self._buf.clear()  # the input ended inside a line: nothing more will come
                return None
        self._line_end = newline + 1
        line = bytes(self._buf[:newline])
        line = line[:-1] if line.endswith(b"\r") else line
        if len(line) > MAX_HEADER_LINE_BYTES:
            raise _BadHeader(f"a header line over {MAX_HEADER_LINE_BYTES} bytes", in_line=True)
        return line

    def _consume_line(self) -> None:
        del self._buf[:self._line_end]

    def _resync(self, start: int) -> bool:
        """Drop bytes up to the next `Content-Length:` found from `start`; False at end of input."""
        while (found := _RESYNC.search(self._buf, start)) is None:
            del self._buf[:max(0, len(self._buf) - 32)]  # keep what may be a split header name
            start = 0
            if not self._fill():
                self._buf.clear()
                return False
        del self._buf[:found.start()]
        return True

    def _skip(self, length: int) -> None:
        """Read past a body over `max_frame`, answering what it was."""
        if length > self.max_skip:
            raise self._lost(f"{length} bytes")
        while len(self._buf) < min(length, PEEK_BYTES) and self._fill():
            pass
        keys = top_level_keys(bytes(self._buf[:min(length, PEEK_BYTES)]))
        left = length
        while left:
            if not self._buf and not self._fill():
                break
            taken = min(left, len(self._buf))
            del self._buf[:taken]
            left -= taken
        why = f"a message of {length} bytes (talaria lsp reads at most {self.max_frame})"
        if "method" in keys and valid_id(keys.get("id", None)) and "id" in keys:
            self._reply(keys["id"], INVALID_REQUEST, f"{why}: send less at once")
        else:
            method = keys.get("method")
            what = f" ({method})" if isinstance(method, str) else ""
            self._out.send({"jsonrpc": "2.0", "method": "window/showMessage", "params": {
                "type": 1, "message": f"Talaria: skipped {why}{what[:200]}"}})

    def _lost(self, declared: str) -> FramingLost:
        return FramingLost(f"a frame declares {declared}, more than the {self.max_skip} bytes "
                           "skipped to find the next frame: the input is not LSP frames; "
                           f"{FORMAT} (at most {self.max_frame} bytes)")

    def _parse(self, body: bytes) -> dict[str, Any] | None:
        """The message `body` holds, or None after answering why it is not one."""
        try:
            message = json.loads(body)
        except RecursionError:  # deeper than the parser goes: its id may still be readable
            keys = top_level_keys(body[:PEEK_BYTES])
            msg_id = keys.get("id")
            self._reply(msg_id if "method" in keys and valid_id(msg_id) else None,
                        INVALID_REQUEST, f"the message nests deeper than {MAX_DEPTH} levels")
            return None
        except ValueError as exc:
            self._reply(None, PARSE_ERROR, f"the body is not JSON ({str(exc)[:200]}): {FORMAT}")
            return None
        if not isinstance(message, dict):
            self._reply(None, INVALID_REQUEST, f"the body is a JSON {type(message).__name__}, "
                                               "not a message object")
            return None
        if too_deep(message, MAX_DEPTH):
            msg_id = message.get("id")
            self._reply(msg_id if "method" in message and valid_id(msg_id) else None,
                        INVALID_REQUEST, f"the message nests deeper than {MAX_DEPTH} levels")
            return None
        return message

    def _fill(self) -> bool:
        if self._eof:
            return False
        chunk = self._in.read1(READ_CHUNK_BYTES)  # type: ignore[attr-defined]
        if not chunk:
            self._eof = True
            return False
        self._buf += chunk
        return True

    def _reply(self, msg_id: Any, code: int, message: str) -> None:
        self._out.send({"jsonrpc": "2.0", "id": msg_id,
                        "error": {"code": code, "message": f"talaria lsp: {message}"}})


class _BadHeader(Exception):
    def __init__(self, message: str, *, in_line: bool = False) -> None:
        super().__init__(message)
        self.in_line = in_line
        """The bad line is still in the buffer: resync from its second byte."""


def valid_id(value: Any) -> bool:
    """An id a request can carry (LSP: integer or string)."""
    return isinstance(value, str) or isinstance(value, int) and not isinstance(value, bool)


def too_deep(value: Any, limit: int) -> bool:
    """`value` nests more than `limit` arrays/objects deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


def top_level_keys(prefix: bytes) -> dict[str, Any]:
    """The top-level keys and values a JSON object's first bytes hold, up to the first value
    they cut (a body too large to read: is it a request, and with which id?)."""
    text, decoder = prefix.decode("utf-8", "replace"), json.JSONDecoder()
    found: dict[str, Any] = {}
    at = _WS.match(text).end()  # type: ignore[union-attr]
    if text[at:at + 1] != "{":
        return found
    at += 1
    try:
        while True:
            key, at = decoder.raw_decode(text, _WS.match(text, at).end())  # type: ignore[union-attr]
            at = _WS.match(text, at).end()  # type: ignore[union-attr]
            if not isinstance(key, str) or text[at:at + 1] != ":":
                return found
            value, at = decoder.raw_decode(text, _WS.match(text, at + 1).end())  # type: ignore[union-attr]
            found[key] = value
            at = _WS.match(text, at).end()  # type: ignore[union-attr]
            if text[at:at + 1] != ",":
                return found
            at += 1
    except (ValueError, RecursionError):
        return found


def _glued(block: bytearray) -> int:
    """Where in `block` (header lines read) a `Content-Length:` starts mid-line, or -1."""
    for found in _RESYNC.finditer(block):
        if found.start() > 0 and block[found.start() - 1] not in b"\n":
            return found.start()
    return -1


def _shown(data: bytes) -> str:
    return repr(data[:60].decode("utf-8", "replace")) + ("..." if len(data) > 60 else "")
