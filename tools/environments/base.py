"""The Environment seam: where a session's commands run and where its files live.

An `Environment` is started lazily (at the first tool call that needs it, so a session opens
at once) and returns the `Workspace` its tools act through: the door's own workspace for
local, the door's for files plus the container for commands when the project is bind-mounted
(docker, singularity: the editor's `fs/*` still sees every read and write), or a remote one
for both when the files live elsewhere (ssh, cloud). `EnvWorkspace` is what a session's door
holds; it can switch environment during the session.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from talaria.tools.environments.spec import EnvSpec
from talaria.tools.errors import EnvError
from talaria.tools.workspace import CommandResult, SearchPage, Workspace, WorkspaceError

if TYPE_CHECKING:
    from talaria.tools.processes.base import Background
    from talaria.tools.sandbox.tiers import SandboxSpec

log = logging.getLogger(__name__)


class Environment(Protocol):
    spec: EnvSpec
    shares_files: bool
    """True when the project's files are the door's files (local disk, bind mount)."""

    @property
    def where(self) -> str | None:
        """Where tools act, for cards and results (`container talaria-ab12 (podman)`);
        None for local."""
        ...

    async def start(self, base: Workspace) -> Workspace:
        """Bring the environment up (once) and return the workspace tools act through.
        Raises EnvError with one line: the cause and what to do."""
        ...

    def close(self) -> None:
        """Tear it down (or keep it, when persistent); the project's edits are brought home
        first where the files live elsewhere. Safe to call twice."""
        ...


class LocalEnvironment:
    """This machine: the door's own workspace, unchanged."""

    shares_files = True
    where = None

    def __init__(self, spec: EnvSpec) -> None:
        self.spec = spec

    async def start(self, base: Workspace) -> Workspace:
        return base

    def close(self) -> None:
        pass


def open_environment(spec: EnvSpec, *, cwd: Path, session_id: str, home: Path,
                     extra: tuple[Path, ...] = ()) -> Environment:
    """The backend for `spec` (not started). Imports only that backend's module. `extra`: the
    session's additional directories, mounted beside the project (docker, singularity); an
    environment that copies the project elsewhere (ssh, cloud) refuses them (EnvError)."""
    if spec.backend == "local":
        return LocalEnvironment(spec)
    if spec.backend == "docker":
        from talaria.tools.environments.docker import DockerEnvironment

        return DockerEnvironment(spec, cwd=cwd, session_id=session_id, extra=extra)
    if spec.backend == "singularity":
        from talaria.tools.environments.singularity import SingularityEnvironment

        return SingularityEnvironment(spec, cwd=cwd, session_id=session_id, extra=extra)
    if extra:
        raise EnvError(f"the {spec.backend} environment copies only the project ({cwd}) to "
                       f"where it runs, not the additional directory {extra[0]}: use local, "
                       "docker or singularity for a session with additional directories")
    if spec.backend == "ssh":
        from talaria.tools.environments.ssh import SshEnvironment

        return SshEnvironment(spec, cwd=cwd, session_id=session_id, home=home)
    from talaria.tools.environments.cloud import CloudEnvironment

    return CloudEnvironment(spec, cwd=cwd, session_id=session_id, home=home)


class EnvWorkspace:
    """The Workspace a session's door holds: every call goes to the current environment's
    workspace, started at the first call. A failed start is that call's error (the next
    call tries again); `switch` moves the session to another environment."""

    def __init__(self, base: Workspace, env: Environment) -> None:
        self.base = base
        self.env = env
        self.cwd = base.cwd
        self.roots = base.roots
        self._active: Workspace | None = None
        self._lock = anyio.Lock()

    @property
    def name(self) -> str:
        return self.env.spec.label

    @property
    def where(self) -> str | None:
        return self.env.where

    async def active(self) -> Workspace:
        """The environment's workspace, (re)started as needed: `start` is cheap once up, and
        brings back a connection that was lost."""
        async with self._lock:
            self._active = await self.env.start(self.base)
        return self._active

    async def switch(self, env: Environment, *, start: bool = True) -> None:
        """Use `env` from now on; the previous one is closed. With `start`, `env` is started
        first, and on failure the session stays where it was (EnvError raised)."""
        if start:
            await env.start(self.base)
        old, self.env, self._active = self.env, env, None
        await anyio.to_thread.run_sync(old.close)

    async def helper(self) -> Any:
        """The environment's `HelperCommands` (its helper's mux and path map), or None when
        commands run on this machine (execute_code then starts its kernel here)."""
        from talaria.tools.environments.remote import HelperCommands

        active = await self.active()
        commands = getattr(active, "commands", active)
        return commands if isinstance(commands, HelperCommands) else None

    @property
    def is_local(self) -> bool:
        return self.env.spec.backend == "local"

    @property
    def can_write(self) -> bool:
        """Writes reach the editor (its buffers, its review): the environment shares the
        door's files and the door writes through the editor (checkpoint restores ask this)."""
        return self.env.shares_files and bool(getattr(self.base, "can_write", False))

    def close(self) -> None:
        self.env.close()

    async def read_text(self, path: Path) -> str:
        return await (await self.active()).read_text(path)

    async def write_text(self, path: Path, text: str) -> None:
        await (await self.active()).write_text(path, text)

    async def search(self, pattern: str, **kwargs: Any) -> SearchPage:
        return await (await self.active()).search(pattern, **kwargs)

    async def run(
        self, command: str, *, cwd: Path, timeout: float, output_limit: int,
        on_terminal: Callable[[str], Awaitable[None]] | None = None,
        sandbox: SandboxSpec | None = None, shell: str | None = None,
    ) -> CommandResult:
        return await (await self.active()).run(
            command, cwd=cwd, timeout=timeout, output_limit=output_limit,
            on_terminal=on_terminal, sandbox=sandbox, shell=shell)

    async def start(self, command: str, **kwargs: Any) -> Background:
        active = await self.active()
        start = getattr(active, "start", None)
        if start is None:
            raise WorkspaceError(f"background processes cannot run in {self.where or 'it'}: "
                                 "its commands go by one exec each (no helper)")
        return await start(command, **kwargs)


def environment_of(workspace: Workspace) -> EnvWorkspace | None:
    return workspace if isinstance(workspace, EnvWorkspace) else None


def acting_where(workspace: Workspace, kind: str) -> str | None:
    """What a tool card should say about where a call acts: the environment when the files
    live there (every tool), or when only commands go there (`execute` tools); else None."""
    ws = environment_of(workspace)
    if ws is None or ws.is_local or ws.env.shares_files and kind != "execute":
        return None
    return ws.where
