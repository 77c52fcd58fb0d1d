"""A kernel's stdout and stderr, cell by cell: read from pipes, capped, spilled to a file.

The kernel writes a per-cell marker to both pipes after each cell; `PipeReader.until` feeds a
`Capture` with the bytes before it. A `Capture` keeps the first 40 % and the last 60 % of its
limit inline and, once output passes the limit, saves everything (up to `SPILL_LIMIT`) to its
spill file so the model can page it with `read_file` instead of re-running the script.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import IO

import anyio

from talaria.tools.execute_code.env import SPILL_LIMIT
from talaria.tools.local.workspace import _HeadTail

READ_CHUNK = 1 << 16
FLUSH_MAX_BYTES = 1 << 20
"""Bytes read without waiting when a cell ends abnormally: a busy writer cannot stall us."""


class Capture:
    """One stream of one cell."""

    def __init__(self, limit: int, spill: Path | None = None) -> None:
        self.limit = limit
        self.head_tail = _HeadTail(limit)
        self.spill = spill
        self.pending = bytearray()  # everything, until the limit is passed
        self.file: IO[bytes] | None = None
        self.saved = 0

    @property
    def total(self) -> int:
        return self.head_tail.total

    def feed(self, data: bytes) -> None:
        self.head_tail.feed(data)
        if self.spill is None or self.saved >= SPILL_LIMIT:
            return
        if self.file is None:
            if self.total <= self.limit:
                self.pending += data
                return
            self.spill.parent.mkdir(parents=True, exist_ok=True)
            self.file = open(self.spill, "wb")  # noqa: SIM115 -- closed by close()
            data, self.pending = bytes(self.pending) + data, bytearray()
        chunk = data[: SPILL_LIMIT - self.saved]
        self.file.write(chunk)
        self.saved += len(chunk)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()

    def result(self) -> tuple[str, int]:
        """(inline text, omitted byte count)."""
        return self.head_tail.result()

    @property
    def spilled(self) -> Path | None:
        return self.spill if self.file is not None else None


class PipeReader:
    """The agent's end of a kernel's stdout or stderr pipe (non-blocking)."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self.pipe = pipe
        self.fd = pipe.fileno()
        os.set_blocking(self.fd, False)
        self.carry = b""
        self.finished = anyio.Event()
        self.marker = b""

    def reset(self, marker: bytes) -> None:
        """Start a cell: drop what a past cell's leftovers wrote in between."""
        self.marker, self.carry, self.finished = marker, b"", anyio.Event()
        self._read_nowait(None, FLUSH_MAX_BYTES)
        self.carry = b""

    async def until(self, capture: Capture) -> None:
        """Feed `capture` up to the marker (or the end of the pipe)."""
        while not self.finished.is_set():
            if self._read_nowait(capture, READ_CHUNK):
                return
            try:
                await anyio.wait_readable(self.fd)
            except (anyio.ClosedResourceError, OSError):
                self._finish(capture)

    def flush_into(self, capture: Capture) -> None:
        """A cell ended (maybe abnormally): take what is already in the pipe, then the carry."""
        if not self.finished.is_set():
            self._read_nowait(capture, FLUSH_MAX_BYTES)
        self._finish(capture)

    def _read_nowait(self, capture: Capture | None, budget: int) -> bool:
        """Read what is available (up to `budget` bytes); True once finished."""
        while budget > 0 and not self.finished.is_set():
            try:
                data = os.read(self.fd, READ_CHUNK)
            except BlockingIOError:
                return False
            except OSError:
                data = b""
            if not data:
                self._finish(capture)
                break
            budget -= len(data)
            data = self.carry + data
            at = data.find(self.marker) if self.marker else -1
            if at >= 0:  # what follows the marker belongs to no cell: dropped
                self.carry = data[:at]
                self._finish(capture)
                break
            keep = max(0, len(data) - len(self.marker) + 1)  # a marker may straddle reads
            if capture is not None:
                capture.feed(data[:keep])
            self.carry = data[keep:]
        return self.finished.is_set()

    def _finish(self, capture: Capture | None) -> None:
        if capture is not None and self.carry:
            capture.feed(self.carry)
        self.carry = b""
        self.finished.set()

    def close(self) -> None:
        if self.pipe.closed:
            return  # the fd number may belong to someone else by now
        with contextlib.suppress(Exception):  # no event loop (a sync close): nobody waits
            anyio.notify_closing(self.fd)
        self.pipe.close()
