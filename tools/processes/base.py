"""What a background process is to its session: a `Background` handle and its `ProcessLog`."""

from __future__ import annotations

from pathlib import Path
from typing import IO

import anyio

from talaria.tools.errors import WorkspaceError
from talaria.tools.stopping import stop_group

TAIL_BYTES = 64 * 1024
"""Output kept in memory per process (the newest); the rest is read back from its log file."""
LOG_FILE_BYTES = 16 * 1024 * 1024
"""Output saved per process; past it the rest is counted, not kept."""
TERM_GRACE_S = 2.0
"""`kill`: between SIGTERM and SIGKILL."""
KILL_WAIT_S = 10.0
"""`kill`: how long to wait for the end after SIGKILL (a remote end reports it)."""


class ProcessLog:
    """A process's output: every byte up to LOG_FILE_BYTES in `path`, the tail in memory."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.total = 0
        """Bytes the process wrote."""
        self.saved = 0
        self.tail = bytearray()
        self._file: IO[bytes] | None = open(path, "wb", buffering=0)  # noqa: SIM115 -- closed by close()

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        self.tail += data
        if len(self.tail) > 2 * TAIL_BYTES:
            del self.tail[: len(self.tail) - TAIL_BYTES]
        room = LOG_FILE_BYTES - self.saved
        if room > 0 and self._file is not None:
            self._file.write(data[:room])
            self.saved += min(room, len(data))

    def replace(self, snapshot: bytes, truncated: bool) -> None:
        """Take a whole-output snapshot (an editor's terminal gives the output so far, its
        start dropped once past its limit): what is new in it is fed."""
        tail = bytes(self.tail[-256:])
        if not truncated and self.total <= len(snapshot):
            new = snapshot[self.total:]
        elif tail and (at := snapshot.rfind(tail)) >= 0:
            new = snapshot[at + len(tail):]
        else:
            new = b"\n[earlier output dropped by the editor]\n" + snapshot if self.total else snapshot
        if new:
            self.feed(new)

    def since(self, offset: int, limit: int) -> tuple[str, int]:
        """Output from byte `offset` on, at most its last `limit` bytes: (text, bytes skipped)."""
        start = max(offset, self.total - limit)
        return self._range(start, self.total), start - offset

    def text(self) -> str:
        return self._range(0, self.total)

    def _range(self, start: int, end: int) -> str:
        tail_start = self.total - len(self.tail)
        if start >= tail_start:
            data = bytes(self.tail[start - tail_start: end - tail_start])
        else:
            with open(self.path, "rb") as f:
                f.seek(start)
                data = f.read(max(0, min(end, self.saved) - start))
        return data.decode("utf-8", "replace")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class Background:
    """One process started by `Workspace.start`. Subclasses fill in how it is watched,
    signalled and fed; this class holds what the table and the tool read."""

    where = "this machine"

    def __init__(self, log: ProcessLog) -> None:
        self.log = log
        self.pid: int | None = None
        self.exit_code: int | None = None
        self.signal: int | None = None
        self.ended = anyio.Event()
        self.killed = False

    @property
    def running(self) -> bool:
        return not self.ended.is_set()

    async def watch(self) -> None:
        """Pump output into the log until the process ended; then set `ended`. Run once,
        by the table, for as long as the session lives."""
        raise NotImplementedError

    async def refresh(self) -> None:
        """Bring `log` and `ended` up to date where nothing pushes them (the editor)."""

    async def kill(self) -> None:
        """Stop the process group (`talaria.tools.stopping`: SIGTERM twice, SIGKILL after
        TERM_GRACE_S); returns once it ended (or the kill could not be delivered, or
        KILL_WAIT_S passed)."""
        self.killed = True

        async def ended(seconds: float) -> bool:
            with anyio.move_on_after(seconds):
                await self.ended.wait()
            return self.ended.is_set()

        await stop_group(self.send_signal, ended, TERM_GRACE_S, KILL_WAIT_S)

    async def send_signal(self, sig: int) -> bool:
        """Signal its process group; False when that cannot be done (the connection is gone)."""
        raise NotImplementedError

    def kill_now(self) -> None:
        """SIGKILL at once, without waiting (the session is closing)."""
        raise NotImplementedError

    async def write(self, data: bytes | None) -> None:
        """Send `data` to its stdin; None closes stdin (EOF). WorkspaceError when it
        cannot take input."""
        raise WorkspaceError(f"this process runs in {self.where}, which takes no input")

