"""Commands by one `exec` each, for a container whose image has no python3 (so no helper).

Slower than the helper (an `exec` per command, ~100 ms with podman) and without execute_code,
but every image works. A `podman exec`/`docker exec` process leads its own process group in
the container, and the wrapper records its pid: when the command times out, is cancelled, or
leaves background children, one more `exec` kills that group inside the container (killing
the local client alone would leave it running there).
"""

from __future__ import annotations

import dataclasses
import secrets
import shlex
import subprocess
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from talaria.tools.local.workspace import run_command
from talaria.tools.shell import inband, split_inband
from talaria.tools.workspace import CommandResult

if TYPE_CHECKING:
    from talaria.tools.processes.base import Background, ProcessLog
    from talaria.tools.sandbox.tiers import SandboxSpec

KILL_TIMEOUT_S = 30.0


class ExecCommands:
    def __init__(self, engine: str, container: str) -> None:
        self.engine = engine
        self.container = container

    def argv(self, command: str, cwd: Path, pidfile: str) -> list[str]:
        wrapper = (f"echo $$ > {pidfile}; exec \"$(command -v bash || echo sh)\" "
                   f"-c {shlex.quote(command)}")
        return [self.engine, "exec", "-w", str(cwd), self.container, "sh", "-c", wrapper]

    async def run(
        self, command: str, *, cwd: Path, timeout: float, output_limit: int,
        on_terminal: Callable[[str], Awaitable[None]] | None = None,
        sandbox: SandboxSpec | None = None, shell: str | None = None,
    ) -> CommandResult:
        if not cwd.is_dir():  # the project is mounted at its own path: a local check says it
            raise FileNotFoundError(str(cwd))
        mark = None
        if shell is not None:  # the shell's state comes back at the end of the output
            command, mark = inband(shell, command)
        pidfile = f"/tmp/.talaria-{secrets.token_hex(6)}.pid"
        try:
            result = await run_command(command, cwd=cwd, timeout=timeout, output_limit=output_limit,
                                       argv=self.argv(command, cwd, pidfile))
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.kill_group, pidfile)
            raise
        if result.timed_out:  # before the result: the model may look right away
            await anyio.to_thread.run_sync(self.kill_group, pidfile)
        else:  # background children die with the command, as locally; off the critical path
            threading.Thread(target=self.kill_group, args=(pidfile,), daemon=True).start()
        if mark is None:
            return result
        out, state, start = split_inband(result.output.encode("utf-8", "surrogateescape"), mark)
        return dataclasses.replace(result, output=out.decode("utf-8", "replace"), state=state,
                                   state_start=start)

    async def start(self, command: str, *, cwd: Path, sandbox: SandboxSpec | None = None,
                    name: str, log: ProcessLog, shell: str | None = None) -> Background:
        from talaria.tools.environments.polled import PolledBackground

        if not cwd.is_dir():
            raise FileNotFoundError(str(cwd))
        return await PolledBackground.start(
            self.exec, self.exec_sync, (shell or "") + command, cwd=str(cwd), name=name, log=log,
            where=f"container {self.container}", back=str)

    async def exec(self, script: str, timeout: float) -> tuple[int | None, bytes]:
        """A short `sh` script in the container: (exit code, output)."""
        result = await run_command(script, cwd=Path("/"), timeout=timeout, output_limit=1 << 22,
                                   argv=[self.engine, "exec", self.container, "sh", "-c", script])
        return result.exit_code, result.output.encode("utf-8", "surrogateescape")

    def exec_sync(self, script: str) -> None:
        subprocess.run([self.engine, "exec", self.container, "sh", "-c", script],
                       capture_output=True, timeout=KILL_TIMEOUT_S, stdin=subprocess.DEVNULL)

    def kill_group(self, pidfile: str) -> None:
        script = (f"p=$(cat {pidfile} 2>/dev/null) && kill -KILL -$p 2>/dev/null; "
                  f"rm -f {pidfile}")
        subprocess.run([self.engine, "exec", self.container, "sh", "-c", script],
                       capture_output=True, timeout=KILL_TIMEOUT_S, stdin=subprocess.DEVNULL)
