"""A session's background processes: ids, caps, a watcher each, notices, and the end of them all.

    table = ProcessTable(directory)            # ToolState.processes; logs go in `directory`
    entry = await table.start(workspace, "npm run dev", cwd=root, sandbox=None, notify=True)
    entry.id                                   # proc_1a2b3c4d: what the model names it by
    table.take_notes()                         # endings the model has not been told of
    table.close()                              # the session closes: every process is killed

Watchers live in a task group the table hosts on the event loop for the session's whole life
(not the tool call's), so a process is watched, and its end noticed, between turns too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from talaria.tools.errors import WorkspaceError
from talaria.tools.processes.base import Background, ProcessLog

if TYPE_CHECKING:
    from talaria.tools.sandbox.tiers import SandboxSpec
    from talaria.tools.workspace import Workspace

log = logging.getLogger(__name__)

MAX_RUNNING = 8
"""Background processes running at once per session; a ninth is refused until one ends."""
MAX_KEPT = 32
"""Processes remembered per session; the oldest ended ones are forgotten past it."""
NOTE_TAIL_BYTES = 1500
"""Output shown with a notice that a process ended."""


@dataclass(slots=True, eq=False)
class Entry:
    id: str
    command: str
    cwd: Path
    notify: bool
    proc: Background
    started: float = field(default_factory=time.time)
    polled: int = 0
    """Output bytes already shown by `poll`."""
    confined: bool = False
    """It runs in a sandbox (started unseen by the user); input to it stays there."""
    readonly: frozenset[str] = frozenset()
    """The paths its sandbox keeps read-only."""


class ProcessTable:
    def __init__(self, directory: Path, announce: Callable[[str], Awaitable[None]] | None = None) -> None:
        self.directory = directory
        self.announce = announce
        """Shows a notice to the user (set by the runtime: the session's front door)."""
        self.entries: dict[str, Entry] = {}
        self.notes: list[str] = []
        self._tg: anyio.abc.TaskGroup | None = None
        self._host: asyncio.Task[None] | None = None
        self._closed = False

    def running(self) -> list[Entry]:
        return [e for e in self.entries.values() if e.proc.running]

    async def start(self, workspace: Workspace, command: str, *, cwd: Path,
                    sandbox: SandboxSpec | None, notify: bool, shell: str | None = None) -> Entry:
        if self._closed:
            raise WorkspaceError("the session is closing")
        if len(self.running()) >= MAX_RUNNING:
            raise WorkspaceError(
                f"{MAX_RUNNING} background processes are running already (the most a session "
                "may have); stop one with process(action='kill', session_id=...) first")
        self.directory.mkdir(parents=True, exist_ok=True)
        name = f"proc_{secrets.token_hex(4)}"
        log = ProcessLog(self.directory / f"{name}.log")
        try:
            proc = await workspace.start(command, cwd=cwd, sandbox=sandbox, name=name, log=log,
                                         shell=shell)
        except BaseException:
            log.close()
            log.path.unlink(missing_ok=True)
            raise
        entry = Entry(name, command, cwd, notify, proc, confined=sandbox is not None,
                      readonly=frozenset(str(p) for p in sandbox.readonly) if sandbox else frozenset())
        self.entries[name] = entry
        self._forget_old()
        tg = await self._group()
        tg.start_soon(self._watch, entry, name=f"watch {name}")
        return entry

    def get(self, name: str) -> Entry:
        entry = self.entries.get(name)
        if entry is None:
            known = ", ".join(self.entries) or "none"
            raise KeyError(f"no background process {name!r} in this session (known: {known})")
        return entry

    def take_notes(self) -> list[str]:
        notes, self.notes = self.notes, []
        return notes

    async def _watch(self, entry: Entry) -> None:
        try:
            await entry.proc.watch()
        except Exception:  # a lost editor or connection: the process is gone for us
            log.exception("watching %s failed", entry.id)
            entry.proc.ended.set()
        entry.proc.log.close()
        if not entry.proc.killed:
            # The user hears of every end, between turns too (the editor shows it then); the
            # model only of those it asked for (notify_on_complete), at its next call.
            text = ending(entry)
            if entry.notify:
                self.notes.append(text)
            if self.announce is not None:
                with contextlib.suppress(Exception):
                    await self.announce(text.splitlines()[0])

    async def _group(self) -> anyio.abc.TaskGroup:
        if self._tg is None:
            ready = anyio.Event()
            self._host = asyncio.get_running_loop().create_task(self._serve(ready))
            await ready.wait()
        assert self._tg is not None
        return self._tg

    async def _serve(self, ready: anyio.Event) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            ready.set()
            await anyio.sleep_forever()

    def _forget_old(self) -> None:
        ended = [e for e in self.entries.values() if not e.proc.running]
        for entry in ended[: max(0, len(self.entries) - MAX_KEPT)]:
            del self.entries[entry.id]
            entry.proc.log.close()
            with contextlib.suppress(OSError):
                entry.proc.log.path.unlink()

    def close(self) -> None:
        """Kill every process now and forget them (the session closes; safe to call twice)."""
        self._closed = True
        for entry in self.entries.values():
            if entry.proc.running:
                entry.proc.kill_now()
        if self._tg is not None:
            with contextlib.suppress(RuntimeError):  # the event loop is gone already
                self._tg.cancel_scope.cancel()  # the watchers reap what was killed
        shutil.rmtree(self.directory, ignore_errors=True)


def ending(entry: Entry) -> str:
    """What the model is told when a process it asked to hear about ended."""
    proc = entry.proc
    how = (f"exit code {proc.exit_code}" if proc.exit_code is not None
           else f"signal {proc.signal}" if proc.signal else "an unknown status")
    tail, skipped = proc.log.since(0, NOTE_TAIL_BYTES)
    shown = f" Last output:\n{tail}" if tail.strip() else " It printed nothing."
    return (f"[Background process {entry.id} (`{entry.command[:120]}`) ended with {how}.{shown}]"
            if not skipped else
            f"[Background process {entry.id} (`{entry.command[:120]}`) ended with {how}. "
            f"Last {NOTE_TAIL_BYTES} bytes of output:\n{tail}]")
