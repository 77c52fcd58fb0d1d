"""Background processes in the editor's terminals: the user watches them in the editor.

`terminal/create` starts it (wrapped in the sandbox launcher when the call was not seen by the
user); the watcher waits on `terminal/wait_for_exit`, takes the last `terminal/output` and
releases the terminal; `poll`/`log` ask `terminal/output` while it runs; `kill` is
`terminal/kill`. ACP terminals take no input: `write`/`submit`/`close` say so. The process
carries the agent's marker and its id in its environment: the agent's watchdog kills it if
the agent dies, and `kill_now` (the session closing, with no time for a round trip) finds
it by them.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from talaria.tools import procs
from talaria.tools.local.workspace import prepare_command
from talaria.tools.processes.base import Background, ProcessLog
from talaria.tools.workspace import WorkspaceError

if TYPE_CHECKING:
    from talaria.tools.sandbox.tiers import SandboxSpec


class Terminals(Protocol):
    """The editor's `terminal/*` methods of one session (`EditorWorkspace`)."""

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]: ...

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]: ...

OUTPUT_BYTES = 1 << 20
"""`outputByteLimit` asked of the editor for a background terminal."""
RELEASE_TIMEOUT_S = 5.0


class EditorBackground(Background):

    def __init__(self, log: ProcessLog, ws: Terminals, terminal_id: str, name: str,
                 cleanup: Callable[[], None]) -> None:
        super().__init__(log)
        self.ws = ws
        self.terminal_id = terminal_id
        self.name = name
        self.cleanup = cleanup
        self.where = f"the editor's terminal {terminal_id}"
        self._exited = False

    @classmethod
    async def start(cls, ws: Terminals, command: str, *, cwd: Path,
                    sandbox: SandboxSpec | None, name: str, log: ProcessLog,
                    shell: str | None) -> EditorBackground:
        if not cwd.is_dir():
            raise FileNotFoundError(str(cwd))
        argv, extra, cleanup = await prepare_command(["bash", "-c", command], shell, sandbox,
                                                     local=False)
        env = terminal_env({**(extra or {}), "TALARIA_PROC": name})
        try:
            with anyio.CancelScope(shield=True):  # its answer must not be dropped (see run)
                created = await ws.call("terminal/create", {
                    "command": argv[0], "args": argv[1:], "cwd": str(cwd), "env": env,
                    "outputByteLimit": OUTPUT_BYTES})
        except BaseException:
            cleanup()
            raise
        terminal_id = created.get("terminalId")
        if not isinstance(terminal_id, str):
            cleanup()
            raise WorkspaceError("the editor's terminal/create returned no terminalId")
        return cls(log, ws, terminal_id, name, cleanup)

    async def watch(self) -> None:
        try:
            status = await self._wait()
            await self._output()
            self.exit_code = status.get("exitCode")
            self.signal = _signal_number(status.get("signal"))
        finally:
            with (anyio.CancelScope(shield=True), anyio.move_on_after(RELEASE_TIMEOUT_S),
                  contextlib.suppress(WorkspaceError)):
                if not self._exited:  # cancelled (the session closes): end it, then let go
                    await self.ws.call("terminal/kill", {"terminalId": self.terminal_id})
                await self.ws.call("terminal/release", {"terminalId": self.terminal_id})
            self.cleanup()
            self.ended.set()

    async def _wait(self) -> dict[str, Any]:
        """Its exit status: the wait has no time limit (it is a background process)."""
        result = await self.ws.request("terminal/wait_for_exit", {"terminalId": self.terminal_id})
        self._exited = True
        return result

    async def refresh(self) -> None:
        with contextlib.suppress(WorkspaceError):
            await self._output()

    async def _output(self) -> None:
        output = await self.ws.call("terminal/output", {"terminalId": self.terminal_id})
        text = output.get("output")
        if isinstance(text, str):
            self.log.replace(text.encode("utf-8", "surrogateescape"), bool(output.get("truncated")))

    async def kill(self) -> None:
        self.killed = True
        with contextlib.suppress(WorkspaceError):
            await self.ws.call("terminal/kill", {"terminalId": self.terminal_id})
        with anyio.move_on_after(10):
            await self.ended.wait()

    def kill_now(self) -> None:
        self.killed = True
        kill_marked(self.name)


def kill_marked(name: str) -> int:
    """SIGKILL the process groups of this agent's processes whose `$TALARIA_PROC` is `name`."""
    needle = f"TALARIA_PROC={name}".encode()
    agent = f"{procs.MARKER_VAR}={procs.marker()}".encode()
    killed = 0
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if needle in env and agent in env:
            with contextlib.suppress(OSError):
                os.killpg(os.getpgid(int(entry)), signal.SIGKILL)
                killed += 1
    return killed


def _signal_number(name: Any) -> int | None:
    if not isinstance(name, str) or not name:
        return None
    with contextlib.suppress(KeyError):
        return int(signal.Signals[name if name.startswith("SIG") else "SIG" + name])
    return None


def terminal_env(extra: dict[str, str] | None = None) -> list[dict[str, str]]:
    """`terminal/create`'s `env`: the agent's marker (its watchdog kills what carries it when
    the agent dies, even a process the editor started) and what the caller adds."""
    procs.ensure_watchdog()
    env = {procs.MARKER_VAR: procs.marker(), **(extra or {})}
    return [{"name": k, "value": v} for k, v in env.items()]
