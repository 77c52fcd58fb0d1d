"""Background processes on this machine: a process group of its own, stdin a pipe, stdout and
stderr merged into the log; tracked by `talaria.tools.procs`, so they die with the agent."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.abc

from talaria.tools import procs
from talaria.tools.errors import WorkspaceError
from talaria.tools.processes.base import Background, ProcessLog

PROC_VAR = "TALARIA_PROC"
"""Names the background process (its id) in its environment."""
DRAIN_S = 0.5
"""After the leader exits, how long what it left may keep writing before the group is killed."""


class LocalBackground(Background):
    def __init__(self, log: ProcessLog, proc: anyio.abc.Process, record: procs.Record,
                 cleanup: Callable[[], None] | None) -> None:
        super().__init__(log)
        self.proc = proc
        self.pid = proc.pid
        self.record = record
        self.cleanup = cleanup
        self._drained = anyio.Event()
        self._stdin_closed = False

    @classmethod
    async def start(cls, argv: list[str], *, cwd: Path, name: str, log: ProcessLog,
                    cleanup: Callable[[], None] | None = None,
                    env: dict[str, str] | None = None) -> LocalBackground:
        if not cwd.is_dir():
            if cleanup is not None:
                cleanup()
            raise FileNotFoundError(str(cwd))
        env = procs.child_env({**os.environ, **(env or {}), PROC_VAR: name})
        with anyio.CancelScope(shield=True):  # a cancel here must not leak the process
            try:
                proc = await anyio.open_process(
                    argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, start_new_session=True)
            except OSError as exc:
                if cleanup is not None:
                    cleanup()
                raise WorkspaceError(f"could not start the process: {exc}") from None
            record = procs.track(proc.pid, "background")
        return cls(log, proc, record, cleanup)

    async def watch(self) -> None:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._pump)
                await self.proc.wait()
                with anyio.move_on_after(DRAIN_S):
                    await self._drained.wait()
                self._kill_group(signal.SIGKILL)  # what it left in its group ends with it
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                self._kill_group(signal.SIGKILL)
                with anyio.move_on_after(2):
                    await self.proc.wait()
                await self.proc.aclose()
            self.record.close()
            if self.cleanup is not None:
                self.cleanup()
            code = self.proc.returncode
            if code is not None and code < 0:
                self.signal = -code
            else:
                self.exit_code = code
            self.ended.set()

    async def _pump(self) -> None:
        assert self.proc.stdout is not None
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError,
                                 anyio.BrokenResourceError):
            async for chunk in self.proc.stdout:
                self.log.feed(chunk)
        self._drained.set()

    async def send_signal(self, sig: int) -> bool:
        self._kill_group(sig)
        return True

    def kill_now(self) -> None:
        self.killed = True
        self._kill_group(signal.SIGKILL)

    def _kill_group(self, sig: int) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, sig)

    async def write(self, data: bytes | None) -> None:
        stdin = self.proc.stdin
        if stdin is None or self._stdin_closed:
            raise WorkspaceError("its stdin is closed")
        try:
            if data is None:
                self._stdin_closed = True
                await stdin.aclose()
            else:
                await stdin.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise WorkspaceError(f"its stdin is closed ({exc or 'the process stopped reading'})") from None
