"""Cloud sandboxes (Modal, Daytona, Vercel) behind the Workspace seam.

The files live in the sandbox: the project is uploaded as one tar at start and extracted in
the vendor's workdir (`vendors.WORKDIRS`); on close, files changed there are brought back. Each
tool call is one SDK call (`vendors` adapters): a command runs under `timeout` there, and a
cancelled call sends it SIGTERM through a second exec. Search runs the same Python walk as
everywhere else, shipped with the call. SDK calls block: they run in worker threads.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import secrets
import shlex
import tarfile
import time
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import anyio

from talaria.tools.environments.remote import PathMap
from talaria.tools.environments.spec import EnvSpec
from talaria.tools.environments.vendors import ADAPTERS, WORKDIRS, check_credentials, sdk
from talaria.tools.errors import EnvError, WorkspaceError
from talaria.tools.local.files import BINARY_SNIFF_BYTES, MAX_READ_BYTES
from talaria.tools.local.search import _GLOB_CHARS, SEARCH_TIMEOUT_S
from talaria.tools.local.walk import expand_braces
from talaria.tools.local.workspace import _HeadTail
from talaria.tools.shell import inband, map_state, split_inband
from talaria.tools.workspace import CommandResult, SearchMatch, SearchPage, Workspace, search_cap

if TYPE_CHECKING:
    from talaria.tools.processes.base import Background, ProcessLog

KILL_AFTER_S = 2
"""`timeout -k`: SIGKILL this long after the SIGTERM of a timed-out command."""
MARK = "/tmp/.talaria-synced"
"""Touched after each sync: files newer than it are the session's edits."""
WALK = Path(__file__).parent.parent / "local" / "walk.py"
SEARCH_SCRIPT = """
import json, re, sys, time
args = json.loads(sys.argv[1])
ns = {"__name__": "walk"}
exec(compile(open(sys.argv[2]).read(), "walk", "exec"), ns)
deadline = time.monotonic() + args["timeout"]
if args["target"] == "files":
    found = ns["py_files"](args["root"], args["names"], args["globs"], deadline, args["max"])
else:
    found = ns["py_content"](args["root"], re.compile(args["pattern"]), args["globs"], deadline, args["max"])
print(json.dumps(found))
"""


CHANGED_SCRIPT = """
import json, os, sys, tarfile
root, mark, back = sys.argv[1:4]
since = os.stat(mark).st_mtime
names = []
for base, dirs, files in os.walk(root):
    dirs[:] = [d for d in dirs if d not in ("node_modules", ".venv", "__pycache__")]
    for name in files:
        path = os.path.join(base, name)
        if os.lstat(path).st_mtime > since:
            names.append(os.path.relpath(path, root))
with tarfile.open(back, "w") as tar:
    for name in names:
        tar.add(os.path.join(root, name), arcname=name)
print(json.dumps(names))
"""
"""Lists the files changed since the upload and archives them, in the sandbox."""


class CloudWorkspace:
    def __init__(self, adapter: Any, paths: PathMap, base: Workspace, where: str) -> None:
        self.adapter = adapter
        self.paths = paths
        self.cwd = base.cwd
        self.roots = base.roots
        self.where = where

    async def _call(self, fn: Any, *args: Any) -> Any:
        try:
            return await anyio.to_thread.run_sync(fn, *args)
        except (FileNotFoundError, WorkspaceError):
            raise
        except Exception as exc:  # the vendor's own error types: one line, where it happened
            raise EnvError(f"{self.where}: {type(exc).__name__}: {exc}") from None

    async def exec(self, script: str, cwd: str | None, timeout: float) -> tuple[int | None, bytes]:
        return await self._call(self.adapter.exec, ["sh", "-c", script], cwd, timeout)

    async def start(self, command: str, *, cwd: Path, sandbox: Any = None, name: str,
                    log: ProcessLog, shell: str | None = None) -> Background:
        from talaria.tools.environments.polled import EXEC_TIMEOUT_S, PolledBackground

        async def run(script: str, timeout: float) -> tuple[int | None, bytes]:
            return await self.exec(script, None, timeout)

        def run_sync(script: str) -> object:
            return self.adapter.exec(["sh", "-c", script], None, EXEC_TIMEOUT_S)

        return await PolledBackground.start(
            run, run_sync, (shell or "") + command, cwd=self.paths.out(cwd), name=name, log=log,
            where=self.where, back=self.paths.back)

    async def read_text(self, path: Path) -> str:
        data: bytes = await self._call(self.adapter.read, self.paths.out(path))
        if len(data) > MAX_READ_BYTES:
            raise WorkspaceError(f"{path} is too large ({len(data):,} bytes; the limit is {MAX_READ_BYTES:,})")
        if b"\0" in data[:BINARY_SNIFF_BYTES]:
            raise WorkspaceError(f"binary file (NUL bytes): {path}")
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise WorkspaceError(f"binary file (not UTF-8 at byte {exc.start}): {path}") from None

    async def write_text(self, path: Path, text: str) -> None:
        target = self.paths.out(path)
        await self.exec(f"mkdir -p {shlex.quote(str(PurePosixPath(target).parent))}", None, 60)
        await self._call(self.adapter.write, target, text.encode("utf-8"))

    async def search(self, pattern: str, *, root: Path, target: str = "content",
                     file_glob: str | None = None, limit: int = 50,
                     offset: int = 0) -> SearchPage:
        args: dict[str, Any] = {"root": self.paths.out(root), "target": target, "pattern": pattern,
                                "globs": expand_braces(file_glob) if file_glob else None,
                                "timeout": SEARCH_TIMEOUT_S, "max": search_cap(offset, limit),
                                "names": expand_braces(pattern if _GLOB_CHARS & set(pattern) else f"*{pattern}*")}
        walk = f"/tmp/.talaria-walk-{secrets.token_hex(4)}.py"
        await self._call(self.adapter.write, walk, WALK.read_bytes())
        script = (f"python3 -c {shlex.quote(SEARCH_SCRIPT)} {shlex.quote(json.dumps(args))} {walk}; "
                  f"s=$?; rm -f {walk}; exit $s")
        code, out = await self.exec(script, None, SEARCH_TIMEOUT_S + 30)
        if code != 0:
            raise WorkspaceError(f"search failed in {self.where}: {out.decode(errors='replace')[-300:]}")
        found = [SearchMatch(*m) for m in json.loads(out)]
        return SearchPage.of(found, offset=offset, limit=limit)

    async def run(self, command: str, *, cwd: Path, timeout: float, output_limit: int,
                  on_terminal: Any = None, sandbox: Any = None, shell: str | None = None) -> CommandResult:
        mark = None
        if shell is not None:  # the shell's state comes back at the end of the output
            command, mark = inband(shell, command)
        pidfile = f"/tmp/.talaria-cmd-{secrets.token_hex(6)}"
        script = (f"cd {shlex.quote(self.paths.out(cwd))} 2>/dev/null || exit 127; echo $$ > {pidfile}; "
                  f"exec timeout -k {KILL_AFTER_S} {int(timeout)} \"$(command -v bash || echo sh)\" "
                  f"-c {shlex.quote(command)}")
        started = time.monotonic()
        try:
            code, out = await self.exec(script, None, timeout + KILL_AFTER_S + 30)
        except BaseException:
            with anyio.CancelScope(shield=True), anyio.move_on_after(30):
                await self.exec(f"kill -TERM $(cat {pidfile}) 2>/dev/null", None, 30)
            raise
        if code == 127 and not out.strip():
            raise FileNotFoundError(str(cwd))
        state = start = None
        if mark is not None:
            out, state, start = split_inband(out, mark)
        head_tail = _HeadTail(output_limit)
        head_tail.feed(out)
        text, omitted = head_tail.result()
        # GNU timeout exits 124, busybox's 143 (its SIGTERM); 137 after the SIGKILL.
        timed_out = code in (124, 137, 143) and time.monotonic() - started >= timeout - 0.5
        return CommandResult(exit_code=None if timed_out else code, output=self.paths.back(text),
                             omitted_bytes=omitted, timed_out=timed_out,
                             state=map_state(state, self.paths.back),
                             state_start=map_state(start, self.paths.back))


class CloudEnvironment:
    shares_files = False

    def __init__(self, spec: EnvSpec, *, cwd: Path, session_id: str, home: Path | None = None) -> None:
        self.spec = spec
        self.backend = spec.backend
        self.cwd = cwd
        self.settings = spec.settings
        from talaria.tools.home import talaria_home

        self.state_file = (home or talaria_home()) / "environments" / (
            f"{self.backend}-{hashlib.sha256(str(cwd).encode()).hexdigest()[:12]}.json")
        self.adapter: Any = None
        self.workspace: CloudWorkspace | None = None

    @property
    def where(self) -> str:
        return f"{self.backend} sandbox"

    def check(self) -> None:
        sdk(self.backend)
        check_credentials(self.backend)

    async def start(self, base: Workspace) -> Workspace:
        if self.workspace is None:
            self.check()
            restore = self._restore_id()
            paths = PathMap(self.cwd, PurePosixPath(WORKDIRS[self.backend]))
            try:
                self.adapter = await anyio.to_thread.run_sync(ADAPTERS[self.backend], self.settings, restore)
            except EnvError:
                raise
            except Exception as exc:
                raise EnvError(f"{self.backend}: could not create a sandbox: {type(exc).__name__}: {exc}") from None
            workspace = CloudWorkspace(self.adapter, paths, base, self.where)
            await self._upload(workspace)
            self.workspace = workspace
        return self.workspace

    def _restore_id(self) -> str | None:
        if not self.settings.get("persistent"):
            return None
        try:
            return str(json.loads(self.state_file.read_text())["restore"])
        except (OSError, ValueError, KeyError):
            return None

    async def _upload(self, ws: CloudWorkspace) -> None:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            for entry in sorted(os.listdir(self.cwd)):
                tar.add(self.cwd / entry, arcname=entry)
        archive = "/tmp/.talaria-project.tgz"
        await ws._call(self.adapter.write, archive, buffer.getvalue())
        root = shlex.quote(str(ws.paths.remote))
        code, out = await ws.exec(f"mkdir -p {root} && tar -xzf {archive} -C {root} && rm -f {archive} "
                                  f"&& touch {MARK}", None, 600)
        if code != 0:
            raise EnvError(f"{self.where}: the project could not be unpacked: {out.decode(errors='replace')[-200:]}")

    def sync_back(self) -> list[str]:
        """Bring files changed in the sandbox since the upload into the project."""
        ws = self.workspace
        if ws is None:
            return []
        back = "/tmp/.talaria-back.tar"
        code, out = self.adapter.exec(["python3", "-c", CHANGED_SCRIPT, str(ws.paths.remote), MARK,
                                       back], None, 600)
        try:
            names = json.loads(out) if code == 0 else []
        except ValueError:
            names = []
        if not names:
            return []
        with tarfile.open(fileobj=io.BytesIO(self.adapter.read(back))) as tar:
            tar.extractall(self.cwd, filter="data")
        return names

    def close(self) -> None:
        if self.adapter is None:
            return
        adapter, self.adapter = self.adapter, None
        try:
            self.adapter = adapter
            self.sync_back()
        except Exception as exc:  # the sandbox goes anyway; the log says what was not brought back
            import logging

            logging.getLogger(__name__).warning("%s: edits not brought back: %s", self.where, exc)
        finally:
            self.adapter = None
        try:
            if self.settings.get("persistent"):
                restore = adapter.snapshot()
                self.state_file.parent.mkdir(parents=True, exist_ok=True)
                self.state_file.write_text(json.dumps({"restore": restore}))
            adapter.terminate()
        finally:
            self.workspace = None
