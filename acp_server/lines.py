"""Reading newline-delimited messages from a byte stream, with a bound on a line's length.

Lines can be very large (a whole file in one `fs/read_text_file` answer): the buffer grows
as needed up to `max_line_bytes`, a longer line is skipped whole and reported, and the
buffer is compacted once per chunk, not per line, so many small lines stay O(n).
"""

from __future__ import annotations

import anyio
import anyio.abc

READ_CHUNK_BYTES = 1024 * 1024


class LineTooLong(Exception):
    """A line longer than the bound was skipped; the next call reads the line after it."""


class LineReader:
    def __init__(self, reader: anyio.abc.ByteReceiveStream, max_line_bytes: int) -> None:
        self._reader = reader
        self.max_line_bytes = max_line_bytes
        self._buf, self._pos = bytearray(), 0

    async def next(self) -> bytes | None:
        """The next line, without its newline; None at EOF. Raises LineTooLong."""
        buf, too_long, scanned = self._buf, False, self._pos
        while (newline := buf.find(b"\n", scanned)) < 0:
            if len(buf) - self._pos > self.max_line_bytes:
                del buf[:]
                self._pos, too_long = 0, True
            try:
                chunk = await self._reader.receive(READ_CHUNK_BYTES)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                rest = bytes(buf[self._pos :])
                del buf[:]
                self._pos = 0
                return None if too_long or not rest.strip() else rest
            del buf[: self._pos]
            self._pos, scanned = 0, len(buf)
            buf += chunk
        line, self._pos = bytes(buf[self._pos : newline]), newline + 1
        if too_long or len(line) > self.max_line_bytes:
            raise LineTooLong
        return line
