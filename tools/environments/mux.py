"""The agent's end of the environment helper (`helper.py`, whose docstring has the wire).

`Mux.open(argv)` starts the environment's door (`podman exec -i CONTAINER`, `ssh HOST`, ...)
running `python3 -c BOOT`, sends the helper's source and the stdlib-only modules it needs
(`tools/local/files.py`, `walk.py`), and waits for its `init` answer. One reader thread splits
the helper's frames by stream into local socketpairs, so async code waits on a socket like any
other (no task group has to outlive a call) and a slow reader only fills its own socket.
When the helper's end closes (exit, dropped connection), every open stream ends and `lost`
says why, with the last lines the door wrote on stderr.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import socket
import subprocess
import threading
from collections import deque
from pathlib import Path
from typing import Any

import anyio

from talaria.tools import procs
from talaria.tools.errors import EnvError, WorkspaceError

HERE = Path(__file__).parent
HELPER = HERE / "helper.py"
MODULES = {"files": HERE.parent / "local" / "files.py", "walk": HERE.parent / "local" / "walk.py"}
from talaria.tools.environments.helper import BOOT, DATA, EOF, HEADER, JSON  # noqa: E402

START_TIMEOUT_S = 60.0
"""For the door to connect and the helper to answer `init` (an SSH login, a cold container)."""
CALL_TIMEOUT_S = 120.0
"""For one file call (read, write, stat, search has its own bound inside)."""
INLINE_SEND_BYTES = 1 << 16
"""A larger message is written from a worker thread, not the event loop's."""
LOSSY_BUFFER_BYTES = 4 * 1024 * 1024
"""What a lossy stream holds unread before it drops (if the kernel allows a buffer that big)."""
STDERR_LINES = 20
"""Lines of the door's stderr kept to explain a lost connection."""
WHY_WAIT_S = 1.0
"""How long a lost connection waits for the door (ssh, podman) to exit and its last stderr
line to be read: that line is the cause (`Could not resolve hostname`), not "lost"."""
BOOT_ARGV = ["python3", "-I", "-S", "-u", "-c", BOOT]
"""The helper's command line in the environment."""


class Inbox:
    """One stream from the helper: the reader thread writes, async code reads.

    `lossy`: for output nobody may be reading for a while (a kernel's stdout between scripts,
    which a local pipe would hold until the writer blocks): what the socket cannot take at
    once is dropped, so one idle stream never stalls the connection's other streams."""

    def __init__(self, lossy: bool = False) -> None:
        self.reader, self.writer = socket.socketpair()
        self.reader.setblocking(False)
        self.lossy = lossy
        self.dropped = 0
        if lossy:
            with contextlib.suppress(OSError):  # the kernel caps it (net.core.wmem_max)
                self.writer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, LOSSY_BUFFER_BYTES)
            self.writer.setblocking(False)

    def put(self, payload: bytes) -> None:
        """From the reader thread: `payload` for the async side (OSError: it gave up)."""
        if not self.lossy:
            self.writer.sendall(payload)
            return
        try:
            sent = self.writer.send(payload)
        except BlockingIOError:
            sent = 0
        self.dropped += len(payload) - sent

    async def read(self) -> bytes:
        """The next chunk; b"" at the end of the stream."""
        while True:
            try:
                return self.reader.recv(1 << 16)
            except BlockingIOError:
                await anyio.wait_readable(self.reader)

    async def read_all(self, limit: int = 1 << 30) -> bytes:
        out = bytearray()
        while chunk := await self.read():
            out += chunk
            if len(out) > limit:
                raise WorkspaceError(f"the environment sent more than {limit:,} bytes")
        return bytes(out)

    def read_all_blocking(self, timeout: float, limit: int = 1 << 30) -> bytes:
        """`read_all` for a thread with no event loop (a session closing, a sync)."""
        self.reader.setblocking(True)
        self.reader.settimeout(timeout)
        out = bytearray()
        try:
            while chunk := self.reader.recv(1 << 16):
                out += chunk
                if len(out) > limit:
                    raise WorkspaceError(f"the environment sent more than {limit:,} bytes")
        except TimeoutError:
            raise EnvError(f"no answer within {timeout:g} s") from None
        return bytes(out)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            anyio.notify_closing(self.reader)
        self.reader.close()
        self.writer.close()


class Mux:
    def __init__(self, proc: subprocess.Popen[bytes], where: str) -> None:
        self.proc = proc
        self.where = where
        self.facts: dict[str, Any] = {}
        self.lost: str | None = None
        self._ids = itertools.count(1)
        self._inboxes: dict[int, Inbox] = {}
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self.record = procs.track(proc.pid, "environment")
        # Both made before either starts: the reader, at a quick EOF, asks the stderr one why.
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        reader = threading.Thread(target=self._read, daemon=True, name=f"mux {where}")
        self._stderr_reader.start()
        reader.start()

    @classmethod
    async def open(cls, argv: list[str], where: str, *, env: dict[str, str] | None = None,
                   timeout: float = START_TIMEOUT_S) -> Mux:
        """Start `argv` (which must run BOOT_ARGV in the environment) and the helper in it."""
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True, env=procs.child_env(env))
        except OSError as exc:
            raise EnvError(f"{where}: cannot run {argv[0]}: {exc.strerror or exc}") from None
        mux = cls(proc, where)
        try:
            source = HELPER.read_bytes()
            mux._write(b"%d\n" % len(source) + source)
            modules = {name: path.read_text(encoding="utf-8") for name, path in MODULES.items()}
            with anyio.fail_after(timeout):
                mux.facts = await mux.request({"op": "init", "modules": modules})
        except TimeoutError:
            mux.close()
            raise EnvError(f"{where}: no answer within {timeout:g} s{mux._why()}") from None
        except (OSError, EnvError, WorkspaceError) as exc:
            mux.close()
            raise EnvError(f"{where}: the helper did not start{mux._why() or f' ({exc})'}") from None
        return mux

    # -- frames --------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        with self._send_lock:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def send(self, kind: int, stream: int, payload: bytes = b"") -> None:
        if self.lost is not None:
            raise EnvError(self.lost)
        try:
            self._write(HEADER.pack(kind, stream, len(payload)) + payload)
        except (OSError, ValueError):  # ValueError: the pipe was closed by close()
            raise EnvError(self._lost_message()) from None

    def send_json(self, msg: dict[str, Any]) -> None:
        self.send(JSON, 0, json.dumps(msg).encode())

    def send_data(self, stream: int, data: bytes | None) -> None:
        """DATA for a stream the helper reads (a process's stdin), or its EOF (None)."""
        if data is None:
            self.send(EOF, stream)
        for i in range(0, len(data or b""), 1 << 16):
            self.send(DATA, stream, (data or b"")[i:i + (1 << 16)])

    def inbox(self, *, lossy: bool = False) -> tuple[int, Inbox]:
        """A new stream id and where its data arrives (see `Inbox` for `lossy`)."""
        stream = next(self._ids)
        box = Inbox(lossy)
        with self._lock:
            if self.lost is not None:
                box.writer.close()
            self._inboxes[stream] = box
        return stream, box

    def drop(self, stream: int) -> None:
        with self._lock:
            box = self._inboxes.pop(stream, None)
        if box is not None:
            box.close()

    async def request(self, msg: dict[str, Any], limit: int = 1 << 30) -> Any:
        """Send a control message with a `reply` stream; its JSON answer (`ok` unwrapped)."""
        stream, box = self.inbox()
        try:
            data = json.dumps({**msg, "reply": stream}).encode()
            if len(data) > INLINE_SEND_BYTES:  # a big write_file: the pipe may take a while
                await anyio.to_thread.run_sync(self.send, JSON, 0, data)
            else:
                self.send(JSON, 0, data)
            raw = await box.read_all(limit)
        finally:
            self.drop(stream)
        return self._answer(raw)

    def request_blocking(self, msg: dict[str, Any], timeout: float = CALL_TIMEOUT_S,
                         limit: int = 1 << 30) -> Any:
        """`request` from a thread with no event loop."""
        stream, box = self.inbox()
        try:
            self.send_json({**msg, "reply": stream})
            raw = box.read_all_blocking(timeout, limit)
        finally:
            self.drop(stream)
        return self._answer(raw)

    def _answer(self, raw: bytes) -> Any:
        """A reply stream's JSON answer, `ok` unwrapped; EnvError for an error or no reply."""
        if not raw:
            raise EnvError(self._lost_message())
        answer = json.loads(raw)
        if "error" in answer and "ok" not in answer:
            raise remote_error(answer)
        return answer.get("ok", answer)

    async def call(self, fn: str, /, *, within: float = CALL_TIMEOUT_S, **args: Any) -> Any:
        """A helper function's result (read, write, stat, search, changed, now, mkdir)."""
        with anyio.fail_after(within):
            return await self.request({"op": "call", "fn": fn, "args": args})

    def _read(self) -> None:
        assert self.proc.stdout is not None
        out = self.proc.stdout
        try:
            while True:
                header = out.read(HEADER.size)
                if len(header) < HEADER.size:
                    break
                kind, stream, length = HEADER.unpack(header)
                payload = out.read(length) if length else b""
                with self._lock:
                    box = self._inboxes.get(stream)
                if box is None:
                    continue
                try:
                    if kind == EOF:
                        box.writer.close()
                    elif payload:
                        box.put(payload)
                except OSError:  # the reader gave the stream up
                    pass
        except (OSError, ValueError):
            pass
        with self._lock:
            self.lost = self._lost_message()
            boxes = list(self._inboxes.values())
        for box in boxes:
            box.writer.close()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        with contextlib.suppress(OSError, ValueError):
            for line in self.proc.stderr:
                self._stderr.append(line.decode("utf-8", "replace").rstrip())

    def _why(self) -> str:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(WHY_WAIT_S)
        if self.proc.returncode is not None:  # its last words may still be in the pipe
            self._stderr_reader.join(WHY_WAIT_S)
        lines = [ln for ln in self._stderr if ln.strip()]
        return f": {lines[-1].strip()}" if lines else ""

    def _lost_message(self) -> str:
        return f"the connection to {self.where} was lost{self._why()}"

    def close(self) -> None:
        """Close the helper's stdin (it kills what it started and exits); kill the door
        if it lingers. Safe to call twice."""
        with contextlib.suppress(OSError, ValueError):
            assert self.proc.stdin is not None
            with self._send_lock:
                self.proc.stdin.close()
        try:
            self.proc.wait(2.0)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, 9)
            self.proc.wait()
        self.record.close()
        with self._lock:
            boxes = list(self._inboxes.values())
            self._inboxes.clear()
        for box in boxes:
            box.close()


def remote_error(answer: dict[str, Any]) -> Exception:
    """The helper's error answer as the exception the local workspace would raise."""
    message, kind = str(answer.get("error")), answer.get("type")
    if kind == "FileNotFoundError":
        return FileNotFoundError(message)
    if kind == "NotADirectoryError":
        return NotADirectoryError(message)
    if kind == "PermissionError":
        return PermissionError(message)
    if kind == "TimeoutError":
        return WorkspaceError("search timed out; narrow the path or file_glob")
    return WorkspaceError(message)

def status_of(raw: bytes) -> dict[str, Any] | None:
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
