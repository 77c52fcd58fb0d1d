"""`LocalWorkspace`: the Workspace seam on the local disk and local subprocesses.

Used headless, in batch runs, and when the editor lacks a capability. Blocking file I/O runs
in worker threads; commands run in their own process group so that a timeout or a cancelled
turn kills everything they started (a `sleep 100 &` must not outlive its tool call), and
under `talaria.tools.procs` so that they die with the agent even when it is killed.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from talaria.tools import procs
from talaria.tools.local import ripgrep
from talaria.tools.local import search as local_search
from talaria.tools.local.files import (  # noqa: F401 -- re-exported: the client imports them here
    MAX_READ_BYTES,
    read_text_sync,
    write_text_sync,
)
from talaria.tools.stopping import stop_group
from talaria.tools.workspace import CommandResult, SearchPage, WorkspaceError, search_cap

if TYPE_CHECKING:
    from talaria.tools.processes.base import Background, ProcessLog
    from talaria.tools.sandbox.tiers import Prepared, SandboxSpec

HEAD_SHARE = 0.4
"""Share of `output_limit` kept from the start of a command's output; the rest is its tail."""
TERM_GRACE_S = 2.0
"""Between SIGTERM and SIGKILL of a command's process group."""
DRAIN_S = 0.5
"""After the shell exits, how long background children may keep the pipe open."""


class LocalWorkspace:
    """Disk and subprocesses. `roots` defaults to `(cwd,)`; policy is the dispatcher's."""

    def __init__(self, cwd: Path, roots: tuple[Path, ...] | None = None) -> None:
        self.cwd = Path(os.path.abspath(cwd))
        self.roots = tuple(Path(os.path.abspath(r)) for r in roots) if roots else (self.cwd,)
        self._searches = object()
        """Names this workspace's searches: a next page reads on from its own last one's."""

    async def read_text(self, path: Path) -> str:
        return await anyio.to_thread.run_sync(read_text_sync, path)

    async def write_text(self, path: Path, text: str) -> None:
        self.files_may_change()
        await anyio.to_thread.run_sync(write_text_sync, path, text)

    def files_may_change(self) -> None:
        """A write or a command is coming: the next page of an earlier search searches again
        rather than read on from a run that began before it (`ripgrep.Runs`)."""
        ripgrep.RUNS.forget(self._searches)

    async def search(
        self,
        pattern: str,
        *,
        root: Path,
        target: str = "content",
        file_glob: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> SearchPage:
        found = await local_search.search(pattern, root=root, target=target, file_glob=file_glob,
                                          cap=search_cap(offset, limit), offset=offset,
                                          owner=self._searches)
        return SearchPage.arranged(found.page(offset, limit), total=len(found.matches),
                                   complete=found.complete)

    async def run(
        self,
        command: str,
        *,
        cwd: Path,
        timeout: float,
        output_limit: int,
        on_terminal: Callable[[str], Awaitable[None]] | None = None,
        sandbox: SandboxSpec | None = None,
        shell: str | None = None,
    ) -> CommandResult:
        self.files_may_change()
        with StateFile(shell, sandbox) as state:
            if state.sandbox is None:
                result = await run_command(command, cwd=cwd, timeout=timeout,
                                           output_limit=output_limit, env=state.env)
            else:
                prepared = await anyio.to_thread.run_sync(
                    sandboxed, [_shell(), "-c", command], state.sandbox, True)
                try:
                    result = await run_command(command, cwd=cwd, timeout=timeout,
                                               output_limit=output_limit, argv=prepared.argv,
                                               env=state.env)
                finally:
                    prepared.cleanup()
            return state.into(result)

    async def start(
        self, command: str, *, cwd: Path, sandbox: SandboxSpec | None = None, name: str,
        log: ProcessLog, shell: str | None = None,
    ) -> Background:
        from talaria.tools.processes.local import LocalBackground

        self.files_may_change()
        argv, env, cleanup = await prepare_command([_shell(), "-c", command], shell, sandbox,
                                                   local=True)
        return await LocalBackground.start(argv, cwd=cwd, name=name, log=log, cleanup=cleanup,
                                           env=env)


async def prepare_command(
    argv: list[str], shell: str | None, sandbox: SandboxSpec | None, *, local: bool,
) -> tuple[list[str], dict[str, str] | None, Callable[[], None]]:
    """For a process that outlives this call (a background one): `argv` wrapped in the
    sandbox (its shell files writable there), the environment its shell needs, and what
    removes both once it ended. `local`: spawned by this process, not by an editor."""
    state = StateFile(shell, sandbox).__enter__()
    cleanups: list[Callable[[], None]] = [state.close]
    if state.sandbox is not None:
        try:
            prepared = await anyio.to_thread.run_sync(sandboxed, argv, state.sandbox, local)
        except BaseException:
            state.close()
            raise
        argv = prepared.argv
        cleanups.append(prepared.cleanup)

    def cleanup() -> None:
        for step in cleanups:
            step()

    return argv, state.env, cleanup


class StateFile:
    """A command's shell prologue on this machine (`shell`): the prologue file its bash
    sources (`$BASH_ENV`) and the file it saves its state to, in a private directory,
    readable and writable in the sandbox too; gone after the command."""

    def __init__(self, shell: str | None, sandbox: SandboxSpec | None) -> None:
        self.shell = shell
        self.wanted = shell is not None
        self.sandbox = sandbox
        self.env: dict[str, str] | None = None
        self.directory: str | None = None
        self.path = ""

    def __enter__(self) -> StateFile:
        if self.wanted:
            import tempfile  # at a command's first run, not at start (`random`, `shutil`)

            from talaria.tools.shell import STATE_VAR, state_path

            self.directory = tempfile.mkdtemp(prefix="talaria-shell-")
            self.path = state_path(self.directory)
            prologue = self.path + ".sh"
            with open(prologue, "w") as f:
                f.write(self.shell or "")
            self.env = {STATE_VAR: self.path, "BASH_ENV": prologue}
            if self.sandbox is not None:
                self.sandbox = dataclasses.replace(
                    self.sandbox, writable=(*self.sandbox.writable, Path(self.directory)))
        return self

    def into(self, result: CommandResult) -> CommandResult:
        if not self.wanted:
            return result
        from talaria.tools.shell import read_state

        state, start = read_state(self.path)
        return dataclasses.replace(result, state=state, state_start=start)

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove its directory (a background process's: when it ended)."""
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)


def sandboxed(argv: list[str], spec: SandboxSpec, local: bool) -> Prepared:
    """`argv` wrapped in the sandbox launcher (`local`: spawned by this process, not by an
    editor); WorkspaceError, which the model sees, when it cannot be set up."""
    from talaria.tools.sandbox.tiers import SandboxError, prepare

    try:
        return prepare(argv, spec, local=local)
    except (SandboxError, OSError) as exc:
        raise WorkspaceError(f"the sandbox could not be set up: {exc}") from None


class _HeadTail:
    """Keeps the first `head` and last `tail` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.head_max = int(limit * HEAD_SHARE)
        self.tail_max = max(limit - self.head_max, 0)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_max - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > 2 * self.tail_max + 65536:  # trim rarely, not per chunk
            del self.tail[: len(self.tail) - self.tail_max]

    def result(self) -> tuple[str, int]:
        tail = bytes(self.tail[max(0, len(self.tail) - self.tail_max) :]) if self.tail_max else b""
        omitted = self.total - len(self.head) - len(tail)
        if omitted <= 0:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace"), 0
        marker = f"\n... [{omitted:,} bytes omitted] ...\n"
        text = self.head.decode("utf-8", "replace") + marker + tail.decode("utf-8", "replace")
        return text, omitted


def _shell() -> str:
    return shutil.which("bash") or shutil.which("sh") or "/bin/sh"


def _group_alive(pgid: int) -> bool:
    """Whether any non-zombie process is left in the group. Zombies are skipped because
    some container inits never reap orphans, and a zombie holds no resources."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc"):
        return True
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


async def _group_gone(proc: anyio.abc.Process, seconds: float) -> bool:
    """Wait up to `seconds` for the shell to be reaped and its whole group to exit."""
    with anyio.move_on_after(seconds):
        while True:
            if proc.returncode is None:
                with anyio.move_on_after(0.05):
                    await proc.wait()
            if proc.returncode is not None and not _group_alive(proc.pid):
                return True
            await anyio.sleep(0.02)
    return False


async def _kill_group(proc: anyio.abc.Process) -> None:
    """Stop the command's process group (`talaria.tools.stopping`: SIGTERM twice, SIGKILL
    after TERM_GRACE_S), reap the shell."""

    async def send(sig: int) -> bool:
        try:
            os.killpg(proc.pid, sig)
        except OSError:  # group gone (or a member changed uid: nothing more we may do)
            return False
        return True

    await stop_group(send, lambda seconds: _group_gone(proc, seconds), TERM_GRACE_S, TERM_GRACE_S)
    with anyio.move_on_after(TERM_GRACE_S):
        await proc.wait()


async def run_command(
    command: str, *, cwd: Path, timeout: float, output_limit: int,
    argv: list[str] | None = None, env: dict[str, str] | None = None,
) -> CommandResult:
    """Run `command` with `bash -c` (else `sh -c`) in a new session, stdin from /dev/null,
    stdout and stderr merged and capped head + tail. Leftover background children are
    killed with the group when the shell exits, on timeout and on cancellation, and by the
    agent's watchdog if the agent dies first (see `talaria.tools.procs`). `argv` replaces
    `bash -c command` (the same command wrapped in a sandbox); `env` is added to ours."""
    out = _HeadTail(output_limit)
    eof = anyio.Event()
    # Shielded: a cancel landing between the fork and the `try` below would leak the process.
    with anyio.CancelScope(shield=True):
        proc = await anyio.open_process(
            argv or [_shell(), "-c", command],
            cwd=cwd,
            env=procs.child_env({**os.environ, **env} if env else None),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        record = procs.track(proc.pid, "command")

    async def pump() -> None:
        assert proc.stdout is not None
        try:
            async for chunk in proc.stdout:
                out.feed(chunk)
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        eof.set()

    exited = False
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            with anyio.move_on_after(timeout):
                await proc.wait()
                exited = True
                with anyio.move_on_after(DRAIN_S):
                    await eof.wait()
            await _kill_group(proc)
            with anyio.move_on_after(DRAIN_S):  # a child that left the group may hold the pipe
                await eof.wait()
            tg.cancel_scope.cancel()
    except BaseException:
        with anyio.CancelScope(shield=True):
            await _kill_group(proc)
            await proc.aclose()
        record.close()
        raise
    with anyio.CancelScope(shield=True):
        await proc.aclose()
    record.close()
    output, omitted = out.result()
    return CommandResult(
        exit_code=proc.returncode if exited else None,
        output=output,
        omitted_bytes=omitted,
        timed_out=not exited,
    )
