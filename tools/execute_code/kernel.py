"""The agent side of execute_code kernels: start one in the sandbox, run cells, stop it.

A `Kernel` is one sandboxed interpreter (`tools/execute_code/child.py`, whose docstring has the wire
format) and its channel: one end of a socketpair the child inherits as a file descriptor.
While a cell runs, every frame the child sends is checked before anything else happens: a
malformed frame, a call from a cell that has ended, a tool outside the whitelist or past the
call limit is answered with an error and never reaches a tool. `talaria.tools.execute_code.pool` decides
which kernels live.

A kernel's scratch dir is its TMPDIR (and, in strict mode, its working dir): inside the
sandbox a private tmpfs of `Limits.tmp_bytes` where the tier allows it (see
`talaria.tools.sandbox.tiers`). It is recorded with `talaria.tools.procs`, so it dies with the
agent even where the channel's end would not be noticed (a script that ignores it).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from talaria.tools import procs
from talaria.tools.errors import KernelError
from talaria.tools.execute_code.env import ExecSettings, interpreter, scrub_env
from talaria.tools.execute_code.output import Capture, PipeReader

KERNEL_MAIN = Path(__file__).with_name("child.py")
MAX_FRAME_BYTES = 32 * 1024 * 1024
"""A longer line from the kernel is dropped and answered with an error."""
MAX_ID_CHARS = 64
MARKER_WAIT_S = 1.0
"""After a cell's `done`, how long its output may take to reach the end marker."""
EXIT_WAIT_S = 0.5
"""When the channel closes mid-cell, how long the kernel may take to exit on its own."""
CANCEL_GRACE_S = 0.3
"""On cancellation, between SIGTERM and SIGKILL (the issue allows 1 s in all)."""

Dispatch = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


def fingerprint(settings: ExecSettings, cwd: Path, env: dict[str, str]) -> tuple[Any, ...]:
    """What a kernel is started with; when it changes, the session needs a new kernel."""
    return (settings.mode, str(cwd), env.get("VIRTUAL_ENV"), env.get("CONDA_PREFIX"),
            settings.env_passthrough, settings.tier, settings.readonly, settings.hidden,
            settings.roots)


@dataclass(slots=True)
class Cell:
    """What one execution produced."""

    status: str
    """success, error, timeout or interrupted (the kernel died mid-script)."""
    exit_code: int | None
    error: str | None
    stdout: Capture
    stderr: Capture
    tool_calls: int = 0
    duration: float = 0.0
    tmp_full: int | None = None
    """The size of TMPDIR's filesystem when the cell left it full, else None."""


@dataclass(slots=True)
class Kernel:
    proc: subprocess.Popen[bytes]
    sock: socket.socket
    out: PipeReader
    err: PipeReader
    tier: str
    fingerprint: tuple[Any, ...]
    scratch: Path
    tag: str
    """Unique word in the child's command line, to find its processes."""
    warnings: tuple[str, ...] = ()
    cleanup: Callable[[], None] | None = None
    """The sandbox's, for once the process has exited."""
    record: procs.Record | None = None
    stubs: str = ""
    """The `hermes_tools` source the kernel holds; a cell given another one reloads it."""
    last_used: float = field(default_factory=time.monotonic)
    busy: bool = False
    cells: int = 0
    _buf: bytearray = field(default_factory=bytearray)
    _skipping: bool = False
    _unsent: memoryview = field(default_factory=lambda: memoryview(b""))
    """The part of a frame the socket did not take at once (see `spawn`)."""

    @classmethod
    def spawn(cls, settings: ExecSettings, cwd: Path, stubs: str,
              env: dict[str, str] | None = None, *, ahead: bool = False) -> Kernel:
        """Start a kernel in the sandbox and hand it the `hermes_tools` source; returns as soon
        as the process exists (~1 ms): the interpreter boots meanwhile, and the first `run`
        waits for it. `ahead`: no script is on its way, so the kernel may finish its setup
        (`site`) first. Call it on the event loop's thread, never a worker thread: a
        parent-death signal set by the sandbox fires when the *thread* that forked exits."""
        from talaria.tools.sandbox.bytecode import precompile
        from talaria.tools.sandbox.tiers import Limits, SandboxError, SandboxSpec, prepare

        env = dict(os.environ if env is None else env)
        tag = f"talaria-kernel-{secrets.token_hex(6)}"
        scratch = settings.cache() / tag
        python, warnings = interpreter(settings.mode, env)
        strict = settings.mode == "strict"
        workdir = scratch if strict else cwd
        precompile(KERNEL_MAIN)
        parent, child = socket.socketpair()
        try:
            scratch.mkdir(parents=True)
            fd = child.fileno()
            argv = [python, "-I", "-S", "-u", str(KERNEL_MAIN), "--fd", str(fd), "--tag", tag]
            limits = Limits() if settings.tmp_bytes is None else Limits(tmp_bytes=settings.tmp_bytes)
            spec = SandboxSpec(writable=() if strict else (cwd, *settings.roots), tmp=scratch,
                               limits=limits, readonly=settings.readonly,
                               readable_hidden=settings.hidden)
            prepared = prepare(argv, spec, tier=settings.tier, pass_fds=(fd,))
            kenv = procs.child_env(scrub_env(env, settings.env_passthrough)) | {
                "TMPDIR": str(scratch), "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONIOENCODING": "utf-8",
            }
            proc = subprocess.Popen(
                prepared.argv, preexec_fn=prepared.preexec_fn, pass_fds=(fd,),
                start_new_session=True, env=kenv, cwd=workdir, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )
        except (OSError, ValueError, subprocess.SubprocessError, SandboxError) as exc:
            parent.close()
            shutil.rmtree(scratch, ignore_errors=True)
            raise KernelError(f"could not start the Python kernel: {type(exc).__name__}: {exc}") from exc
        finally:
            child.close()
        parent.setblocking(False)
        assert proc.stdout is not None and proc.stderr is not None
        kernel = cls(proc, parent, PipeReader(proc.stdout), PipeReader(proc.stderr),
                     prepared.tier, fingerprint(settings, cwd, env), scratch, tag,
                     tuple(warnings) + tuple(prepared.warnings), prepared.cleanup,
                     procs.track(proc.pid, "execute_code"), stubs)
        path = [] if strict else [str(workdir)]
        init = {"op": "init", "stubs": stubs, "idle": settings.idle_s, "path": path,
                "site_now": ahead}
        # A socketpair takes ~200 KB at once, the stubs are a few KB: this does not block, and
        # what the socket would not take waits in `_unsent` for the next `send`.
        kernel._unsent = _encode(init)
        try:
            kernel._unsent = kernel._unsent[parent.send(kernel._unsent):]
        except BlockingIOError:
            pass
        except OSError as exc:
            kernel.kill()
            raise KernelError(f"the kernel exited at once: {exc}") from exc
        return kernel

    @classmethod
    async def start(cls, settings: ExecSettings, cwd: Path, stubs: str,
                    env: dict[str, str] | None = None) -> Kernel:
        """`spawn`, then wait until the `init` frame is sent."""
        kernel = cls.spawn(settings, cwd, stubs, env)
        try:
            await kernel.flush()
        except BaseException:
            kernel.kill()
            raise
        return kernel

    def alive(self) -> bool:
        return self.proc.poll() is None and self.sock.fileno() >= 0

    async def run(self, code: str, settings: ExecSettings, dispatch: Dispatch,
                  allowed: frozenset[str], spill: Path, stubs: str | None = None) -> Cell:
        """Run one cell under the timeout, answering its tool calls through `dispatch`.
        `stubs`: the `hermes_tools` source for this cell, when the tools a script may call
        changed since the kernel started (an MCP server came up)."""
        self.busy, self.cells = True, self.cells + 1
        started = time.monotonic()
        marker = f"\x00<end {secrets.token_hex(8)}>\x00".encode()
        cell = Cell("interrupted", None, None, Capture(settings.stdout_limit, spill),
                    Capture(settings.stderr_limit))
        done: dict[str, Any] | None = None
        try:
            self.out.reset(marker)
            self.err.reset(marker)
            with anyio.move_on_after(settings.timeout) as timer:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self.out.until, cell.stdout)
                    tg.start_soon(self.err.until, cell.stderr)
                    done = await self._serve(cell, marker, code, settings.max_tool_calls,
                                             dispatch, allowed, stubs)
                    with anyio.move_on_after(MARKER_WAIT_S if done else 0):
                        await self.out.finished.wait()
                        await self.err.finished.wait()
                    tg.cancel_scope.cancel()
            if timer.cancelled_caught:
                cell.status = "timeout"
            elif done is not None:
                cell.exit_code, cell.error = done.get("exit_code"), done.get("error")
                cell.status = "success" if cell.exit_code == 0 else "error"
                cell.tmp_full = done.get("tmp_full")
            if done is None:  # timed out or died: stop it, keep what it printed
                with anyio.CancelScope(shield=True):
                    if cell.status == "interrupted":  # let it exit with its own status
                        await self._exited(EXIT_WAIT_S)
                    await self.stop(settings.kill_grace)
                if cell.status == "interrupted":
                    cell.exit_code = self.proc.returncode
        finally:
            self.out.flush_into(cell.stdout)
            self.err.flush_into(cell.stderr)
            cell.stdout.close()
            cell.stderr.close()
            self.busy, self.last_used = False, time.monotonic()
            if not self.alive():
                self.kill()  # now that nobody reads them, the pipes close too
            cell.duration = time.monotonic() - started
        return cell

    async def _serve(self, cell: Cell, marker: bytes, code: str, max_calls: int,
                     dispatch: Dispatch, allowed: frozenset[str],
                     stubs: str | None) -> dict[str, Any] | None:
        """Send the cell, then answer frames until its `done` (returned) or the end of the
        channel (None)."""
        frame = {"op": "run", "cell": self.cells, "code": code, "marker": marker.decode()}
        if stubs is not None and stubs != self.stubs:
            frame["stubs"] = self.stubs = stubs
        try:
            await self.send(frame)
            return await self._answer(cell, max_calls, dispatch, allowed)
        except OSError:  # the kernel is gone
            return None

    async def _answer(self, cell: Cell, max_calls: int, dispatch: Dispatch,
                      allowed: frozenset[str]) -> dict[str, Any] | None:
        while True:
            frame = await self._frame()
            if frame is None:
                return None
            if isinstance(frame, str):
                await self.send({"op": "result", "id": None, "error": f"malformed frame: {frame}"})
                continue
            op, cid = frame.get("op"), frame.get("id")
            if op == "done" and frame.get("cell") == self.cells:
                return frame
            if op == "done":
                continue  # a past cell's, already accounted for
            problem = self._refuse(frame, cell.tool_calls, max_calls, allowed)
            if problem:
                ok_id = isinstance(cid, int | str) and len(str(cid)) <= MAX_ID_CHARS
                await self.send({"op": "result", "id": cid if ok_id else None, "error": problem})
                continue
            cell.tool_calls += 1
            try:
                result = await dispatch(frame["tool"], frame["args"])
            except Exception as exc:  # a dispatcher bug must not leave the script waiting
                result = {"error": f"{frame['tool']} failed: {type(exc).__name__}: {exc}"}
            await self.send({"op": "result", "id": cid, "result": result})

    def _refuse(self, frame: dict[str, Any], calls: int, max_calls: int,
                allowed: frozenset[str]) -> str | None:
        """Why a frame must not reach a tool, or None."""
        if frame.get("op") != "call":
            return f"malformed frame: unknown op {frame.get('op')!r}"
        cid, tool, args = frame.get("id"), frame.get("tool"), frame.get("args")
        if not isinstance(cid, int | str) or isinstance(cid, bool) or len(str(cid)) > MAX_ID_CHARS:
            return "malformed frame: `id` must be a short string or integer"
        if not isinstance(tool, str) or not isinstance(args, dict):
            return "malformed frame: `tool` must be a string and `args` an object"
        if frame.get("cell") != self.cells:
            return "the script run that made this call has ended; the call was not run"
        if tool not in allowed:
            return (f"{tool!r} cannot be called from execute_code; available: "
                    f"{', '.join(sorted(allowed))}")
        if calls >= max_calls:
            return f"tool call limit reached: at most {max_calls} calls per execute_code run"
        return None

    async def _frame(self) -> dict[str, Any] | str | None:
        """The next frame; a string says why a line was malformed; None at end of channel."""
        while True:
            newline = self._buf.find(b"\n")
            if newline >= 0:
                line = bytes(self._buf[:newline])
                del self._buf[: newline + 1]
                if self._skipping or len(line) > MAX_FRAME_BYTES:
                    self._skipping = False
                    return f"longer than {MAX_FRAME_BYTES} bytes"
                try:
                    frame = json.loads(line)
                except (ValueError, UnicodeDecodeError) as exc:
                    return f"not JSON ({exc})"
                return frame if isinstance(frame, dict) else "not a JSON object"
            if len(self._buf) > MAX_FRAME_BYTES:
                self._buf.clear()
                self._skipping = True
            try:
                data = self.sock.recv(1 << 16)
            except BlockingIOError:
                try:
                    await anyio.wait_readable(self.sock)
                except anyio.ClosedResourceError:  # killed while we waited
                    return None
                continue
            if not data:
                return None
            self._buf += data

    async def send(self, frame: dict[str, Any]) -> None:
        await self.flush()
        self._unsent = _encode(frame)
        await self.flush()

    async def flush(self) -> None:
        """Send what is left of the last frame."""
        while self._unsent:
            try:
                self._unsent = self._unsent[self.sock.send(self._unsent):]
            except BlockingIOError:
                await anyio.wait_writable(self.sock)

    def signal(self, sig: int) -> None:
        with contextlib.suppress(OSError):  # already gone
            os.killpg(self.proc.pid, sig)

    async def stop(self, grace: float) -> None:
        """SIGTERM the process group, SIGKILL it after `grace` seconds, close the channel."""
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
            await self._exited(grace)
        self.kill()

    async def _exited(self, seconds: float) -> None:
        with anyio.move_on_after(seconds):
            while self.proc.poll() is None:
                await anyio.sleep(0.01)

    def kill(self) -> None:
        """SIGKILL the process group and close the channel (the kernel's watchdog then kills
        whatever left the group). Safe to call twice."""
        self.signal(signal.SIGKILL)
        if self.sock.fileno() >= 0:
            with contextlib.suppress(Exception):  # no event loop (a sync close): nobody waits
                anyio.notify_closing(self.sock)
            self.sock.close()
        if not self.busy:  # a running cell still drains them; it closes them when done
            self.out.close()
            self.err.close()
        self.proc.poll()  # reap if already dead; else subprocess reaps it on a later Popen
        shutil.rmtree(self.scratch, ignore_errors=True)
        cleanup, self.cleanup = self.cleanup, None
        if cleanup is not None:
            cleanup()
        if self.record is not None:
            self.record.close()


def _encode(frame: dict[str, Any]) -> memoryview:
    return memoryview((json.dumps(frame, default=str) + "\n").encode())
