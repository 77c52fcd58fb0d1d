"""Background processes in an environment, through its helper: a process group there, its
stdin a stream the agent writes, its output a stream the watcher reads. They end with the
helper, so with the agent's connection (see `talaria.tools.environments.helper`)."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from talaria.tools.environments.mux import status_of
from talaria.tools.errors import EnvError, WorkspaceError
from talaria.tools.processes.base import Background, ProcessLog

if TYPE_CHECKING:
    from talaria.tools.environments.mux import Mux

DRAIN_S = 2.0
"""After its end, how long the rest of its output may take to arrive."""


class RemoteBackground(Background):
    def __init__(self, log: ProcessLog, mux: Mux, back: Callable[[str], str], ids: dict[str, int],
                 boxes: dict[str, Any]) -> None:
        super().__init__(log)
        self.mux = mux
        self.back = back
        self.where = mux.where
        self.ids = ids
        self.boxes = boxes
        self.stdin_open = True
        self._drained = anyio.Event()

    @classmethod
    async def start(cls, mux: Mux, back: Callable[[str], str], command: str, *, cwd: str,
                    name: str, log: ProcessLog, spawn: dict[str, Any]) -> RemoteBackground:
        """`back` turns the environment's paths in its output into the project's local ones;
        `spawn`: more of the spawn message (the shell prologue)."""
        (out_id, out), (status_id, status_box), (stdin_id, _) = mux.inbox(), mux.inbox(), mux.inbox()
        mux.drop(stdin_id)  # a stream the helper reads: only its number is needed here
        spawn["env"] = {**spawn.get("env", {}), "TALARIA_PROC": name}
        try:
            mux.send_json({"op": "spawn", "command": command, "cwd": cwd, "stdout": out_id,
                           "stderr": None, "stdin": stdin_id, "status": status_id, **spawn})
        except EnvError as exc:
            mux.drop(out_id)
            mux.drop(status_id)
            raise WorkspaceError(str(exc)) from None
        return cls(log, mux, back, {"out": out_id, "status": status_id, "stdin": stdin_id},
                   {"out": out, "status": status_box})

    async def watch(self) -> None:
        status: dict[str, Any] | None = None
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._pump)
                status = status_of(await self.boxes["status"].read_all())
                with anyio.move_on_after(DRAIN_S):
                    await self._drained.wait()
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                if status is None:
                    self.kill_now()
            self.mux.drop(self.ids["out"])
            self.mux.drop(self.ids["status"])
            status = status or {}
            if status.get("type") in ("FileNotFoundError", "NotADirectoryError"):
                self.log.feed(f"talaria: no such directory: {status.get('error')}\n".encode())
            elif status.get("error"):
                self.log.feed(f"talaria: it could not start: {status['error']}\n".encode())
            self.exit_code = status.get("code")
            self.signal = status.get("signal")
            self.ended.set()

    async def _pump(self) -> None:
        while chunk := await self.boxes["out"].read():
            self.log.feed(self.back(chunk.decode("utf-8", "surrogateescape"))
                          .encode("utf-8", "surrogateescape"))
        self._drained.set()

    async def send_signal(self, sig: int) -> bool:
        return self._signal(sig)

    def kill_now(self) -> None:
        self.killed = True
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> bool:
        try:
            self.mux.send_json({"op": "signal", "status": self.ids["status"], "sig": int(sig)})
        except EnvError:
            return False
        return True

    async def write(self, data: bytes | None) -> None:
        if not self.stdin_open:
            raise WorkspaceError("its stdin is closed")
        try:
            self.mux.send_data(self.ids["stdin"], data)
        except EnvError as exc:
            raise WorkspaceError(str(exc)) from None
        if data is None:
            self.stdin_open = False

