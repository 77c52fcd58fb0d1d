"""Guard the process's stdio so that only protocol bytes reach the editor.

Stray stdout output (a `print`, a library banner, a child process inheriting fd 1) is the most
common way ACP agents break in editors, and patching `sys.stdout` does not stop a subprocess.
So the guard works on file descriptors:

- the real stdout is moved to a private, close-on-exec fd that only the protocol writes to, and
  fd 1 becomes a copy of stderr (prints and children's output land in the editor's log);
- the real stdin is moved to a private fd too, and fd 0 reads /dev/null, so a child process
  (`git` asking for a password, a script calling `input()`) cannot eat protocol bytes.

    streams = protect_stdio()
    peer = Peer(streams.reader, streams.writer)
"""

from __future__ import annotations

import contextlib
import os
import select
import stat
import sys
import threading
from typing import NamedTuple

import anyio
import anyio.abc
import anyio.lowlevel
from anyio import from_thread, to_thread

READ_CHUNK_BYTES = 1024 * 1024
READ_BUFFER_CHUNKS = 4
"""Chunks read ahead of the event loop (back-pressure: at most ~4 MiB in flight)."""


class StdioStreams(NamedTuple):
    reader: anyio.abc.ByteReceiveStream
    writer: anyio.abc.ByteSendStream


def protect_stdio() -> StdioStreams:
    """Move the protocol off fds 0/1 (see the module docstring); call once, at start-up."""
    protocol_in, protocol_out = protect_stdio_fds()
    return StdioStreams(FdReceiveStream(protocol_in), FdSendStream(protocol_out))


def protect_stdio_fds() -> tuple[int, int]:
    """`protect_stdio` for a door with its own I/O (`talaria lsp` on pygls): the private
    (stdin, stdout) fds the protocol owns."""
    sys.stdout.flush()
    protocol_out = os.dup(1)  # os.dup makes a non-inheritable fd (PEP 446): children can't write
    protocol_in = os.dup(0)
    os.set_inheritable(protocol_out, False)
    os.set_inheritable(protocol_in, False)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdout = sys.stderr
    return protocol_in, protocol_out


protect_stdout = protect_stdio


def fd_streams(read_fd: int, write_fd: int) -> StdioStreams:
    """Streams over two fds (pipes, sockets, ttys), e.g. for tests; they own (close) the fds."""
    return StdioStreams(FdReceiveStream(read_fd), FdSendStream(write_fd))


class FdReceiveStream(anyio.abc.ByteReceiveStream):
    """Reads an fd in a daemon thread, in chunks, without blocking the event loop.

    A daemon thread rather than an anyio worker thread: a worker blocked in `read(0)` would keep
    the interpreter from exiting when the loop stops for any reason other than EOF. The stream
    owns the fd: the thread closes it at EOF. Closing it earlier, under a blocked `read`, would
    let the thread read from whatever file gets that fd number next.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._chunks: anyio.abc.ObjectReceiveStream[bytes] | None = None

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if self._chunks is None:
            if self._fd < 0:
                raise anyio.ClosedResourceError
            self._chunks = self._start_reader()
        try:
            return await self._chunks.receive()
        except anyio.ClosedResourceError:  # we were closed: same as EOF for the reader
            raise anyio.EndOfStream from None

    def _start_reader(self) -> anyio.abc.ObjectReceiveStream[bytes]:
        send, receive = anyio.create_memory_object_stream[bytes](READ_BUFFER_CHUNKS)
        token, fd = anyio.lowlevel.current_token(), self._fd

        def pump() -> None:
            # Any error (EBADF, loop gone, receiver closed) means: stop, and report EOF.
            with contextlib.suppress(Exception):
                while chunk := os.read(fd, READ_CHUNK_BYTES):
                    try:  # straight to the waiting reader: a loop pass less than `send`
                        from_thread.run_sync(send.send_nowait, chunk, token=token)
                    except anyio.WouldBlock:  # READ_BUFFER_CHUNKS ahead: wait for room
                        from_thread.run(send.send, chunk, token=token)
            with contextlib.suppress(OSError):
                os.close(fd)
            with contextlib.suppress(Exception):
                from_thread.run_sync(send.close, token=token)

        threading.Thread(target=pump, name=f"stdio-read-{fd}", daemon=True).start()
        return receive

    async def aclose(self) -> None:
        if self._chunks is not None:
            await self._chunks.aclose()  # the thread stops (and closes the fd) at its next chunk
        elif self._fd >= 0:
            os.close(self._fd)
        self._fd = -1


class FdSendStream(anyio.abc.ByteSendStream):
    """Writes whole buffers to an fd: from a worker thread, so an editor that stops reading
    never blocks the event loop; a small message to a pipe with room is written at once."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        try:
            self._pipe = stat.S_ISFIFO(os.fstat(fd).st_mode)
        except OSError:
            self._pipe = False

    async def send(self, item: bytes) -> None:
        if self._fd < 0:
            raise anyio.ClosedResourceError
        # A thread hop per message was most of a streamed turn's overhead (hundreds of small
        # chunks). A pipe that polls writable has room for PIPE_BUF bytes, and a write of at
        # most PIPE_BUF into it is whole and does not block (POSIX); callers send one message
        # at a time (Peer's write lock), so this cannot overtake a write still in a thread.
        if self._pipe and len(item) <= select.PIPE_BUF and _room(self._fd):
            os.write(self._fd, item)
            return
        await to_thread.run_sync(_write_all, self._fd, item)

    async def aclose(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1


def _room(fd: int) -> bool:
    poller = select.poll()  # not select.select: it fails on fds past FD_SETSIZE
    poller.register(fd, select.POLLOUT)
    try:
        return any(events & select.POLLOUT for _, events in poller.poll(0))
    except OSError:
        return False


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
