"""Workspaces over the environment helper: commands (`HelperCommands`) and, where the files
live elsewhere, files too (`RemoteWorkspace`).

Paths stay the project's local paths for the model, the permission checks and the cards;
`PathMap` turns them into the environment's paths at this boundary (identity for a
container with the project mounted at the same path; `~/.talaria/work/...` on an SSH host).
A command runs in its own process group there; a timeout or a cancelled turn sends SIGTERM
(twice: `talaria.tools.stopping`), then SIGKILL, to that group through the helper, so nothing
is left running in the container or on the host. A connection lost mid-command is an
EnvError, never a hang.
"""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from talaria.tools.environments.mux import Mux
from talaria.tools.environments.mux import status_of as _status
from talaria.tools.errors import EnvError, WorkspaceError
from talaria.tools.local.search import _GLOB_CHARS, SEARCH_TIMEOUT_S
from talaria.tools.local.walk import expand_braces
from talaria.tools.local.workspace import TERM_GRACE_S, _HeadTail
from talaria.tools.stopping import stop_group
from talaria.tools.workspace import CommandResult, SearchMatch, SearchPage, Workspace, search_cap

if TYPE_CHECKING:
    from talaria.tools.processes.base import Background, ProcessLog
    from talaria.tools.sandbox.tiers import SandboxSpec

STATUS_WAIT_S = 10.0
"""After SIGKILL, how long the helper may take to report the command's end."""


@dataclass(frozen=True, slots=True)
class PathMap:
    """Local project root <-> its place in the environment."""

    local: Path
    remote: PurePosixPath

    def out(self, path: Path) -> str:
        """The environment's path for a local one (paths outside the project are kept)."""
        try:
            rel = Path(os.path.normpath(path)).relative_to(self.local)
        except ValueError:
            return str(path)
        return str(self.remote / rel) if str(rel) != "." else str(self.remote)

    def back(self, text: str) -> str:
        """A remote path (or text that mentions it) with the project root as it is locally."""
        if str(self.remote) == str(self.local):
            return text
        return text.replace(str(self.remote), str(self.local))


class HelperCommands:
    """`run` through the helper; the caller keeps files where they are. A command's shell
    state (`talaria.tools.shell`) travels as a prologue file and comes back with its status,
    its directory turned back into the project's local path."""

    def __init__(self, mux: Mux, paths: PathMap) -> None:
        self.mux = mux
        self.paths = paths

    async def run(
        self, command: str, *, cwd: Path, timeout: float, output_limit: int,
        on_terminal: Callable[[str], Awaitable[None]] | None = None,
        sandbox: SandboxSpec | None = None, shell: str | None = None,
    ) -> CommandResult:
        return await self._run(command, self.paths.out(cwd), timeout, output_limit, shell)

    async def start(self, command: str, *, cwd: Path, sandbox: SandboxSpec | None = None,
                    name: str, log: ProcessLog, shell: str | None = None) -> Background:
        from talaria.tools.environments.background import RemoteBackground

        spawn = self.shell_spawn(shell)
        spawn.pop("report", None)  # nothing to save: a background command keeps no state
        return await RemoteBackground.start(self.mux, self.paths.back, command,
                                            cwd=self.paths.out(cwd), name=name, log=log,
                                            spawn=spawn)

    def shell_spawn(self, shell: str | None) -> dict[str, Any]:
        """What a spawn message needs for a shell prologue (`talaria.tools.shell`): the
        prologue as a file of the command's private dir, the state files sent back."""
        if shell is None:
            return {}
        from talaria.tools.shell import STATE_VAR

        return {"files": {"prologue": shell},
                "env": {STATE_VAR: "{dir}/state", "BASH_ENV": "{dir}/prologue"},
                "report": ["state", "state.start"]}

    async def _run(self, command: str, start: str, timeout: float, output_limit: int,
                   shell: str | None = None) -> CommandResult:
        # A sandbox spec is not applied: the environment is the boundary (see the README).
        mux = self.mux
        out_id, out = mux.inbox()
        status_id, status_box = mux.inbox()
        head_tail = _HeadTail(output_limit)
        status: dict[str, Any] | None = None
        timed_out = False
        drained = anyio.Event()

        async def pump() -> None:
            while chunk := await out.read():
                head_tail.feed(chunk)
            drained.set()

        try:
            mux.send_json({"op": "spawn", "command": command, "cwd": start, "stdout": out_id,
                           "stderr": None, "stdin": None, "status": status_id,
                           **self.shell_spawn(shell)})
            async with anyio.create_task_group() as tg:
                tg.start_soon(pump)
                with anyio.move_on_after(timeout):
                    status = _status(await status_box.read_all())
                if status is None and mux.lost is None:
                    timed_out = True
                    status = await self._kill(status_id, status_box)
                with anyio.move_on_after(TERM_GRACE_S):
                    await drained.wait()
                tg.cancel_scope.cancel()
        except BaseException:
            with anyio.CancelScope(shield=True):
                if mux.lost is None and status is None:
                    await self._kill(status_id, status_box)
            raise
        finally:
            mux.drop(out_id)
            mux.drop(status_id)
        if status is None or not status:
            raise EnvError(f"{mux.lost or f'the connection to {mux.where} was lost'} "
                           "(the command's end is unknown)")
        if status.get("type") in ("FileNotFoundError", "NotADirectoryError"):
            raise FileNotFoundError(status.get("error"))
        if status.get("error"):
            raise WorkspaceError(f"{mux.where}: {status['error']}")
        output, omitted = head_tail.result()
        report = status.get("report") or {}
        return CommandResult(exit_code=None if timed_out else status.get("code"),
                             output=self.paths.back(output), omitted_bytes=omitted,
                             timed_out=timed_out, state=self._state(report.get("state")),
                             state_start=self._state(report.get("state.start")))

    def _state(self, text: Any) -> bytes | None:
        """A saved shell state, its directory turned back into the project's local path."""
        from talaria.tools.shell import map_state

        if not isinstance(text, str):
            return None
        return map_state(text.encode("utf-8", "surrogateescape"), self.paths.back)

    async def _kill(self, status_id: int, box: Any) -> dict[str, Any] | None:
        """Stop the command's group through the helper (`talaria.tools.stopping`: SIGTERM
        twice, SIGKILL after TERM_GRACE_S); its final status."""
        final: list[dict[str, Any] | None] = []
        done = anyio.Event()

        async def read() -> None:  # one reader throughout: a cancelled read_all loses bytes
            final.append(_status(await box.read_all()) or None)
            done.set()

        async def send(sig: int) -> bool:
            try:
                self.mux.send_json({"op": "signal", "status": status_id, "sig": int(sig)})
            except EnvError:
                return False
            return True

        async def ended(seconds: float) -> bool:
            with anyio.move_on_after(seconds):
                await done.wait()
            return done.is_set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            await stop_group(send, ended, TERM_GRACE_S, STATUS_WAIT_S)
            tg.cancel_scope.cancel()
        return final[0] if final else None



class RemoteWorkspace(HelperCommands):
    """Files and commands in the environment (SSH host, cloud sandbox)."""

    def __init__(self, mux: Mux, paths: PathMap, base: Workspace) -> None:
        super().__init__(mux, paths)
        self.cwd = base.cwd
        self.roots = base.roots

    async def read_text(self, path: Path) -> str:
        return str(await self.mux.call("read", path=self.paths.out(path)))

    async def write_text(self, path: Path, text: str) -> None:
        await self.mux.call("write", path=self.paths.out(path), text=text)

    async def search(
        self, pattern: str, *, root: Path, target: str = "content", file_glob: str | None = None,
        limit: int = 50, offset: int = 0,
    ) -> SearchPage:
        if target not in ("content", "files"):
            raise ValueError(f"target must be 'content' or 'files', not {target!r}")
        args: dict[str, Any] = {"root": self.paths.out(root), "target": target,
                                "globs": expand_braces(file_glob) if file_glob else None,
                                "timeout": SEARCH_TIMEOUT_S, "max": search_cap(offset, limit)}
        if target == "files":
            args["names"] = expand_braces(pattern if _GLOB_CHARS & set(pattern) else f"*{pattern}*")
        else:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise WorkspaceError(f"invalid regex {pattern!r}: {exc}") from None
            args["pattern"] = pattern
        found = await self.mux.call("search", within=SEARCH_TIMEOUT_S + 30, **args)
        return SearchPage.of([SearchMatch(*m) for m in found], offset=offset, limit=limit)


class Commands(Protocol):
    async def run(self, command: str, *, cwd: Path, timeout: float, output_limit: int,
                  on_terminal: Callable[[str], Awaitable[None]] | None = None,
                  sandbox: SandboxSpec | None = None, shell: str | None = None) -> CommandResult: ...


class SplitWorkspace:
    """Files through the door's workspace (the project is mounted), commands elsewhere."""

    def __init__(self, files: Workspace, commands: Commands) -> None:
        self.files = files
        self.commands = commands
        self.cwd = files.cwd
        self.roots = files.roots

    async def read_text(self, path: Path) -> str:
        return await self.files.read_text(path)

    async def write_text(self, path: Path, text: str) -> None:
        await self.files.write_text(path, text)

    async def search(self, pattern: str, **kwargs: Any) -> SearchPage:
        return await self.files.search(pattern, **kwargs)

    async def run(self, command: str, **kwargs: Any) -> CommandResult:
        return await self.commands.run(command, **kwargs)

    async def start(self, command: str, **kwargs: Any) -> Background:
        start = getattr(self.commands, "start", None)
        if start is None:
            raise WorkspaceError("background processes need the environment helper, which "
                                 "needs python3 in the image")
        return await start(command, **kwargs)
