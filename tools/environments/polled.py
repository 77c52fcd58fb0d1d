"""Background processes where commands go by one `exec` each (cloud sandboxes, a container
without python3): nothing of ours stays there to carry a stream, so the process runs detached
in a session of its own, its output in a file there, and a watcher reads what is new with one
short `exec` every POLL_S. No stdin (nothing holds it open). Killed by process group through
one more `exec`; what the environment's teardown does not end, the session's close does.
"""

from __future__ import annotations

import contextlib
import shlex
import signal
from collections.abc import Awaitable, Callable

import anyio

from talaria.tools.errors import WorkspaceError
from talaria.tools.processes.base import Background, ProcessLog

Exec = Callable[[str, float], Awaitable[tuple[int | None, bytes]]]
"""Run a `sh` script there: (exit code, combined output)."""
POLL_S = 1.0
READ_BYTES = 1 << 20
"""Output read per poll at most (the rest comes at the next)."""
EXEC_TIMEOUT_S = 30.0
SEP = b"\0talaria-out\0"


class PolledBackground(Background):

    def __init__(self, log: ProcessLog, run: Exec, run_sync: Callable[[str], object],
                 directory: str, where: str, back: Callable[[str], str]) -> None:
        super().__init__(log)
        self.run = run
        self.run_sync = run_sync
        self.dir = directory
        self.where = where
        self.back = back
        self.offset = 0

    @classmethod
    async def start(cls, run: Exec, run_sync: Callable[[str], object], command: str, *,
                    cwd: str, name: str, log: ProcessLog, where: str,
                    back: Callable[[str], str]) -> PolledBackground:
        """`command`: the whole script (the shell prologue included); `cwd` there."""
        d = f"/tmp/.talaria-bg-{name}"
        q = shlex.quote
        script = (
            f"cd {q(cwd)} 2>/dev/null || exit 127; mkdir -p {d} && printf %s {q(command)} > {d}/cmd "
            f"|| exit 1; sh=$(command -v bash || echo sh); S=$(command -v setsid || true); "
            f"TALARIA_PROC={name} $S sh -c '\"$0\" \"$1\"/cmd; echo $? > \"$1\"/exit' \"$sh\" {d} "
            f"</dev/null >{d}/out 2>&1 & echo $! > {d}/pid")
        code, out = await run(script, EXEC_TIMEOUT_S)
        if code == 127:
            raise FileNotFoundError(cwd)
        if code != 0:
            raise WorkspaceError(f"it did not start in {where}: {out.decode(errors='replace')[-300:]}")
        return cls(log, run, run_sync, d, where, back)

    async def watch(self) -> None:
        try:
            while True:
                await anyio.sleep(POLL_S)
                status = await self._read()
                if status != "running":
                    while await self._more():  # what it wrote last, past one read's worth
                        pass
                    self.exit_code = int(status) if status.lstrip("-").isdigit() else None
                    return
        finally:
            with anyio.CancelScope(shield=True):
                if self.exit_code is None:
                    self.kill_now()
            self.ended.set()

    async def refresh(self) -> None:
        if self.running:
            await self._read()

    async def _read(self) -> str:
        """Take new output; "running", its exit code once it ended, or "gone" (killed, so
        nothing wrote the code)."""
        d = self.dir
        script = (f"if [ -s {d}/exit ]; then cat {d}/exit; elif kill -0 $(cat {d}/pid) 2>/dev/null; "
                  f"then echo running; else echo gone; fi; printf '\\0talaria-out\\0'; "
                  f"tail -c +{self.offset + 1} {d}/out 2>/dev/null | head -c {READ_BYTES}")
        _, out = await self.run(script, EXEC_TIMEOUT_S)
        status, found, data = out.partition(SEP)
        if not found:  # the exec itself failed (the environment went away)
            return "gone"
        self._feed(data)
        return status.decode(errors="replace").strip() or "gone"

    async def _more(self) -> bool:
        _, out = await self.run(f"tail -c +{self.offset + 1} {self.dir}/out | head -c {READ_BYTES}",
                                EXEC_TIMEOUT_S)
        self._feed(out)
        return len(out) >= READ_BYTES

    def _feed(self, data: bytes) -> None:
        self.offset += len(data)
        if data:
            self.log.feed(self.back(data.decode("utf-8", "surrogateescape"))
                          .encode("utf-8", "surrogateescape"))

    async def send_signal(self, sig: int) -> bool:
        code, _ = await self.run(self._signal(signal.Signals(sig).name[3:]), EXEC_TIMEOUT_S)
        return code is not None

    def kill_now(self) -> None:
        self.killed = True
        with contextlib.suppress(Exception):  # the environment is gone already: so is the process
            self.run_sync(self._signal("KILL") + f"; rm -rf {self.dir}")

    def _signal(self, sig: str) -> str:
        return (f"p=$(cat {self.dir}/pid 2>/dev/null) && "
                f"{{ kill -{sig} -$p 2>/dev/null || kill -{sig} $p 2>/dev/null; }}; true")
