"""execute_code's session kernel inside an environment (container, SSH host): same contract.

The kernel is the same `child.py`, started by the environment helper with a socketpair of its
own there (`channel`), its source shipped with the spawn. On this side, `RemoteKernel` is a
`Kernel` whose channel, stdout and stderr are the helper's streams (local socketpairs fed by
the mux, see `mux.Inbox`), whose process is the helper's status stream, and whose signals go
through the helper to the kernel's process group. So tool calls from the script travel back
and are dispatched here like direct calls, limits and the timeout apply, the environment is
scrubbed of secrets (`env.scrub_env`'s rules, applied by the helper), `reset` starts a new one.
Not applied there: the local sandbox tiers (the environment is the boundary).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import socket
import threading
from pathlib import Path
from typing import Any

from talaria.tools.environments.mux import Inbox, Mux
from talaria.tools.environments.remote import PathMap
from talaria.tools.errors import EnvError, KernelError
from talaria.tools.execute_code.env import ESSENTIAL_ENV, SECRET_MARKERS, ExecSettings
from talaria.tools.execute_code.kernel import KERNEL_MAIN, Kernel, _encode, fingerprint
from talaria.tools.execute_code.output import PipeReader


class RemoteProcess:
    """The `subprocess.Popen` surface `Kernel` uses, for a process the helper started."""

    def __init__(self, mux: Mux, status_id: int, status: Inbox) -> None:
        self.mux = mux
        self.status_id = status_id
        self.pid = -1
        self.returncode: int | None = None
        self._done = threading.Event()
        threading.Thread(target=self._wait, args=(status,), daemon=True).start()

    def _wait(self, status: Inbox) -> None:
        try:
            raw = status.read_all_blocking(10 ** 7)
            answer = json.loads(raw) if raw else {}
        except (OSError, ValueError, EnvError):
            answer = {}
        code, sig = answer.get("code"), answer.get("signal")
        self.returncode = code if code is not None else -(sig or 9)
        self._done.set()

    def poll(self) -> int | None:
        return self.returncode if self._done.is_set() else None

    def wait(self, timeout: float | None = None) -> int | None:
        self._done.wait(timeout)
        return self.poll()

    def signal(self, sig: int) -> None:
        if self._done.is_set():
            return
        with contextlib.suppress(EnvError):
            self.mux.send_json({"op": "signal", "status": self.status_id, "sig": int(sig)})


class SocketPipe:
    """A socket with the file surface `PipeReader` uses (`fileno`, `closed`, `close`)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def fileno(self) -> int:
        return self.sock.fileno()

    @property
    def closed(self) -> bool:
        return self.sock.fileno() < 0

    def close(self) -> None:
        self.sock.close()


class RemoteKernel(Kernel):
    def signal(self, sig: int) -> None:
        assert isinstance(self.proc, RemoteProcess)
        self.proc.signal(sig)


def scrub_rules(settings: ExecSettings) -> dict[str, list[str]]:
    return {"keep": list(ESSENTIAL_ENV), "secret": list(SECRET_MARKERS),
            "pass": list(settings.env_passthrough)}


def spawn(mux: Mux, paths: PathMap, settings: ExecSettings, cwd: Path, stubs: str,
          *, ahead: bool = False) -> RemoteKernel:
    """Start a kernel through the helper; returns at once (the first `run` waits for it)."""
    tag = f"talaria-kernel-{secrets.token_hex(6)}"
    # Output between scripts is dropped at each script's start anyway (PipeReader.reset): those
    # streams are lossy, so a script's leftover thread printing forever cannot stall the mux.
    ids = [mux.inbox(), mux.inbox(lossy=True), mux.inbox(lossy=True), mux.inbox()]
    # channel, stdout, stderr, status
    (chan_id, chan), (out_id, out), (err_id, err), (status_id, status) = ids
    remote_cwd = paths.out(cwd) if settings.mode == "project" else "{dir}"
    try:
        mux.send_json({
            "op": "spawn", "argv": ["python3", "-I", "-S", "-u", "{dir}/child.py", "--fd", "{fd}",
                                    "--tag", tag],
            "files": {"child.py": KERNEL_MAIN.read_text(encoding="utf-8")},
            "cwd": remote_cwd, "channel": chan_id, "stdin": None, "stdout": out_id,
            "stderr": err_id, "status": status_id, "scrub": scrub_rules(settings),
            "env": {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8",
                    "TMPDIR": "{dir}"},
        })
    except EnvError as exc:
        for stream, _ in ids:
            mux.drop(stream)
        raise KernelError(f"could not start the Python kernel in {mux.where}: {exc}") from None
    forward = threading.Thread(target=_forward, args=(mux, chan_id, chan.writer), daemon=True)
    forward.start()

    def cleanup() -> None:
        for stream, _ in ids:
            mux.drop(stream)

    proc = RemoteProcess(mux, status_id, status)
    kernel = RemoteKernel(
        proc, chan.reader, PipeReader(SocketPipe(out.reader)),  # type: ignore[arg-type]
        PipeReader(SocketPipe(err.reader)), f"environment ({mux.where})",  # type: ignore[arg-type]
        remote_fingerprint(settings, cwd, mux.where), settings.cache() / tag, tag, (), cleanup)
    path = [remote_cwd] if settings.mode == "project" else []
    kernel._unsent = _encode({"op": "init", "stubs": stubs, "idle": settings.idle_s,
                              "path": path, "site_now": ahead})
    with contextlib.suppress(BlockingIOError):
        kernel._unsent = kernel._unsent[chan.reader.send(kernel._unsent):]
    return kernel


async def start(mux: Mux, paths: PathMap, settings: ExecSettings, cwd: Path, stubs: str) -> RemoteKernel:
    kernel = spawn(mux, paths, settings, cwd, stubs)
    try:
        await kernel.flush()
    except BaseException:
        kernel.kill()
        raise
    return kernel


def remote_fingerprint(settings: ExecSettings, cwd: Path, where: str) -> tuple[Any, ...]:
    return (*fingerprint(settings, cwd, {}), where)


def _forward(mux: Mux, stream: int, sock: socket.socket) -> None:
    """What the kernel's agent end writes (frames to the kernel) -> the helper's channel."""
    try:
        while data := sock.recv(1 << 16):
            mux.send_data(stream, data)
    except (OSError, EnvError):
        pass
    with contextlib.suppress(EnvError):
        mux.send_data(stream, None)
