"""Files a task gets only after its agent finished (tests, a solution, a patch), put where the
task ran, and the paths they have there.

    place = await Place.of(session.workspace, cwd, workdir="/app")
    await place.stage({"tests": Path("task/tests")}, {"test.patch": text})

A task runs in one of two kinds of place:

- **contained** (a container: `docker`, the cloud sandboxes): the paths of Harbor's convention
  exist as they are: tests in `/tests`, a solution in `/solution`, the verifier's reward in
  `/logs/verifier/`, and the image's WORKDIR is the task's workspace (see `link_workdir`).
- **mapped** (this machine, an SSH host, Singularity): those absolute paths belong to the
  host and other tasks run beside this one, so each maps to the task's own staging directory
  (`.talaria-verifier/` in its workspace), and the image's WORKDIR to the workspace itself.
  `place.map(text)` rewrites a command, a script or a prompt accordingly; staged text files
  are rewritten as they are copied.

Staged files are copied on this disk when the place shares it (local, a bind-mounted
container), else written through the workspace (SSH, cloud), text as text and anything
else base64-encoded through a command.
"""

from __future__ import annotations

import base64
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STAGE = ".talaria-verifier"
"""The staging directory, in the task's workspace."""
CONTAINED = ("docker", "modal", "daytona", "vercel")
"""Backends whose commands run as root in a filesystem of the task's own."""
MAX_STAGED_BYTES = 32 * 1024 * 1024
"""More than this in tests/ or solution/ is a dataset mistake (a build artefact left in)."""
B64_CHUNK = 48 * 1024
SETUP_TIMEOUT_S = 120.0


class StageError(Exception):
    """The files could not be put in place; the message says which and why."""


def shell_script(path: str) -> str:
    """Run a script with bash where the place has it, else sh (busybox images)."""
    quoted = shlex.quote(path)
    return (f"if command -v bash >/dev/null 2>&1; then bash {quoted}; "
            f"else sh {quoted}; fi")


@dataclass(slots=True)
class Place:
    workspace: Any
    cwd: Path
    root: str
    """The workspace's path where commands run (the remote copy on an SSH host)."""
    contained: bool
    shares_files: bool
    workdir: str | None = None
    """The task image's WORKDIR (Harbor): the workspace stands for it."""
    _table: dict[str, str] = field(default_factory=dict)

    @classmethod
    async def of(cls, workspace: Any, cwd: Path, *, workdir: str | None = None) -> Place:
        from talaria.tools.environments.base import environment_of

        env = environment_of(workspace)
        backend = env.env.spec.backend if env is not None else "local"
        shares = env.env.shares_files if env is not None else True
        helper = await env.helper() if env is not None else None
        root = helper.paths.out(cwd) if helper is not None else str(cwd)
        place = cls(workspace, cwd, root, backend in CONTAINED, shares, workdir)
        place._table = place._mapping()
        return place

    # -- paths ---------------------------------------------------------------------------------

    @property
    def stage_dir(self) -> str:
        return f"{self.root}/{STAGE}"

    @property
    def tests_dir(self) -> str:
        return "/tests" if self.contained else f"{self.stage_dir}/tests"

    @property
    def solution_dir(self) -> str:
        return "/solution" if self.contained else f"{self.stage_dir}/solution"

    @property
    def verifier_dir(self) -> str:
        return "/logs/verifier" if self.contained else f"{self.stage_dir}/logs/verifier"

    def _mapping(self) -> dict[str, str]:
        if self.contained:
            return {}
        table = {"/logs/verifier": self.verifier_dir, "/logs": f"{self.stage_dir}/logs",
                 "/tests": self.tests_dir, "/solution": self.solution_dir}
        if self.workdir and self.workdir not in ("/", *table):
            table[self.workdir.rstrip("/")] = self.root
        return table

    def map(self, text: str) -> str:
        """`text` with Harbor's absolute paths as they are here (unchanged when contained)."""
        if not self._table:
            return text
        names = sorted(self._table, key=len, reverse=True)
        pattern = r"(?<![\w.~/-])(" + "|".join(re.escape(n) for n in names) + r")(?![\w.-])"
        return re.sub(pattern, lambda m: self._table[m.group(1)], text)

    # -- files ---------------------------------------------------------------------------------

    async def stage(self, dirs: dict[str, Path], files: dict[str, str] | None = None) -> None:
        """Copy each directory of `dirs` to `STAGE/NAME` and each text of `files` to
        `STAGE/NAME`; text files are mapped (see `map`). Raises StageError."""
        host_stage = self.cwd / STAGE
        # Whatever the agent left at the staging path (a planted reward.txt, fake tests) goes.
        if self.shares_files:
            shutil.rmtree(host_stage, ignore_errors=True)
        else:
            await self.run(self.cleanup(), SETUP_TIMEOUT_S)
        entries: list[tuple[str, bytes, bool]] = []
        total = 0
        for name, directory in dirs.items():
            for path in sorted(directory.rglob("*")):
                if path.is_dir() or path.is_symlink() and not path.exists():
                    continue
                data = path.read_bytes()
                total += len(data)
                entries.append((f"{name}/{path.relative_to(directory)}", data,
                                bool(path.stat().st_mode & 0o111)))
        for name, text in (files or {}).items():
            entries.append((name, text.encode(), False))
            total += len(text)
        if total > MAX_STAGED_BYTES:
            raise StageError(f"{', '.join(map(str, dirs.values()))}: {total} bytes to copy in "
                             f"(limit {MAX_STAGED_BYTES}); leave build artefacts out")
        entries = [(rel, self._mapped(data), mode) for rel, data, mode in entries]
        if self.shares_files:
            for rel, data, executable in entries:
                target = host_stage / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
                if executable:
                    target.chmod(0o755)
            return
        await self._write_remote(entries)

    def _mapped(self, data: bytes) -> bytes:
        if not self._table or b"\0" in data:
            return data
        try:
            return self.map(data.decode("utf-8")).encode("utf-8")
        except UnicodeDecodeError:
            return data

    async def seed(self, context: Path, copies: list[tuple[str, str]]) -> None:
        """Without a container, what the image's COPY / ADD put into its WORKDIR (see
        harbor.copies_of): the build context's files copied into the workspace. Raises
        StageError for a source that is not in the context."""
        entries: list[tuple[str, bytes, bool]] = []
        for source, dest in copies:
            found = [p for p in sorted(context.glob(source)) if p.resolve().is_relative_to(
                context.resolve())] if source not in (".", "./") else [context]
            if not found:
                raise StageError(f"{context}: the Dockerfile copies {source!r}, which is not there")
            for path in found:
                into_dir = dest == "" or dest.endswith("/") or len(found) > 1 or path.is_dir()
                for file in ([path] if path.is_file() else sorted(path.rglob("*"))):
                    if not file.is_file() or file.name == "Dockerfile" and file.parent == context:
                        continue
                    if path.is_dir():
                        rel = f"{dest.rstrip('/')}/{file.relative_to(path)}".lstrip("/")
                    else:
                        rel = f"{dest.rstrip('/')}/{file.name}".lstrip("/") if into_dir else dest
                    entries.append((rel, file.read_bytes(), bool(file.stat().st_mode & 0o111)))
        if self.shares_files:
            for rel, data, executable in entries:
                target = self.cwd / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
                if executable:
                    target.chmod(0o755)
            return
        await self._write_remote(entries, base="")

    async def _write_remote(self, entries: list[tuple[str, bytes, bool]],
                            base: str = STAGE) -> None:
        executable: list[str] = []
        for rel, data, is_exec in entries:
            rel = f"{base}/{rel}" if base else rel
            try:
                await self.workspace.write_text(self.cwd / rel, data.decode("utf-8"))
            except UnicodeDecodeError:
                await self._write_binary(rel, data)
            if is_exec:
                executable.append(rel)
        if executable:
            await self.run("chmod +x " + " ".join(map(shlex.quote, executable)), SETUP_TIMEOUT_S)

    async def _write_binary(self, rel: str, data: bytes) -> None:
        target = shlex.quote(rel)
        encoded = base64.b64encode(data).decode()
        await self.run(f"mkdir -p \"$(dirname {target})\" && : > {target}", SETUP_TIMEOUT_S)
        for start in range(0, len(encoded), B64_CHUNK):
            piece = encoded[start:start + B64_CHUNK]
            await self.run(f"printf %s {piece} | base64 -d >> {target}", SETUP_TIMEOUT_S)

    def install(self, name: str) -> str:
        """Shell that puts `STAGE/name` at its conventional path (contained) and removes the
        copy from the workspace; nothing when mapped (the staged copy is the place)."""
        if not self.contained:
            return ""
        target = {"tests": "/tests", "solution": "/solution"}[name]
        source = shlex.quote(f"{STAGE}/{name}")
        return (f"rm -rf {target} && mkdir -p {target} && cp -a {source}/. {target}/ && "
                f"rm -rf {source} && ")

    async def run(self, command: str, timeout: float, output_limit: int = 64 * 1024) -> Any:
        """A command in the task's workspace, where the task ran."""
        return await self.workspace.run(command, cwd=self.cwd, timeout=timeout,
                                        output_limit=output_limit)

    def cleanup(self) -> str:
        return f"rm -rf {shlex.quote(STAGE)}"

    def remove_host_copy(self) -> None:
        if self.shares_files:
            shutil.rmtree(self.cwd / STAGE, ignore_errors=True)


async def link_workdir(place: Place, timeout: float = SETUP_TIMEOUT_S) -> str | None:
    """In a container, make the image's WORKDIR the task's workspace: its files copied into
    the (mounted) workspace, then the WORKDIR a link to it, so the agent's file tools (which
    act on the mounted workspace), its commands, the solution and the tests all see the same
    files. Returns an error line, or None."""
    if not place.contained or not place.workdir or place.workdir.rstrip("/") in ("", place.root):
        return None
    if place.root.startswith(place.workdir.rstrip("/") + "/"):
        # The workspace is mounted inside the WORKDIR: removing the WORKDIR would reach into
        # the mount (this machine's files). The task then works in its mounted directory.
        return None
    workdir = shlex.quote(place.workdir.rstrip("/"))
    root = shlex.quote(place.root)
    result = await place.run(
        f"mkdir -p {workdir} && cp -a {workdir}/. {root}/ && rm -rf {workdir} && "
        f"ln -s {root} {workdir}", timeout)
    if result.exit_code != 0:
        return f"could not link {place.workdir} to the workspace: {result.output.strip()[-300:]}"
    return None
