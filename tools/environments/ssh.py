"""SSH: commands and files on another machine, through the user's OpenSSH.

The user's `~/.ssh/config`, agent and known hosts apply as for any `ssh`; host key checking
stays on (`BatchMode=yes`: an unknown or changed key refuses the connection instead of asking).
One control master per host (`ControlPersist`) carries the helper's connection and every
rsync, so nothing pays a second handshake. The project is copied to a remote workdir
(`~/.talaria/work/NAME-HASH`, kept across sessions: the remote `.venv` and caches survive)
with rsync when both ends have it, else as a tar stream through the helper; `SYNC_SKIP`
directories are not copied (they belong to this machine's platform). On close, files changed
there since the copy are brought back into the project (deletions are not).
"""

from __future__ import annotations

import hashlib
import io
import os
import shlex
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

import anyio

from talaria.tools.environments.mux import BOOT_ARGV, Mux
from talaria.tools.environments.remote import PathMap, RemoteWorkspace
from talaria.tools.environments.spec import EnvSpec
from talaria.tools.errors import EnvError
from talaria.tools.workspace import Workspace

SYNC_SKIP = (".venv", "venv", "node_modules", "__pycache__", ".mypy_cache", ".pytest_cache",
             ".ruff_cache", ".tox")
"""Directories not copied either way."""
CONTROL_PERSIST_S = 60
"""How long the control master outlives the session's last connection."""
ALIVE_INTERVAL_S = 5
ALIVE_COUNT = 3
"""A silent connection is declared dead after ALIVE_INTERVAL_S * ALIVE_COUNT seconds."""
SYNC_TIMEOUT_S = 600.0
MAX_SYNC_BACK_BYTES = 512 * 1024 * 1024
"""A larger set of changed files is not brought back (the error says so)."""


def control_dir() -> Path:
    """Where control sockets live: short (a socket path has ~100 bytes), private."""
    path = Path(tempfile.gettempdir()) / f"talaria-ssh-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


class SshEnvironment:
    shares_files = False

    def __init__(self, spec: EnvSpec, *, cwd: Path, session_id: str, home: Path) -> None:
        self.spec = spec
        self.cwd = cwd
        self.settings = spec.settings
        if not self.settings["host"]:
            raise EnvError("ssh needs a host: --env ssh:HOST, or host = \"...\" in "
                           f"[environments.{spec.name.partition(':')[0]}]")
        if self.settings["sync"] not in ("auto", "rsync", "tar"):
            raise EnvError(f"[environments.ssh] sync must be auto, rsync or tar, got {self.settings['sync']!r}")
        self.mux: Mux | None = None
        self.workdir: PurePosixPath | None = None
        self.synced_at: float | None = None
        self.workspace: RemoteWorkspace | None = None
        self.ssh = shutil.which("ssh")
        self.keeps_shell = bool(self.settings["track_cwd"])

    @property
    def host(self) -> str:
        return str(self.settings["host"])

    @property
    def where(self) -> str:
        return f"ssh {self.host}:{self.workdir or '~'}"

    def ssh_options(self) -> list[str]:
        """Options for every ssh this environment runs (the helper's, rsync's, `-O exit`)."""
        s = self.settings
        opts = ["-o", "BatchMode=yes", "-o", "ControlMaster=auto",
                "-o", f"ControlPath={control_dir()}/%C", "-o", f"ControlPersist={CONTROL_PERSIST_S}",
                "-o", f"ServerAliveInterval={ALIVE_INTERVAL_S}",
                "-o", f"ServerAliveCountMax={ALIVE_COUNT}"]
        if s["port"]:
            opts += ["-p", str(s["port"])]
        if s["user"]:
            opts += ["-l", str(s["user"])]
        if s["identity"]:
            opts += ["-i", os.path.expanduser(str(s["identity"]))]
        for option in s["options"]:
            opts += ["-o", str(option)]
        return opts

    def helper_argv(self) -> list[str]:
        assert self.ssh is not None
        return [self.ssh, *self.ssh_options(), self.host, shlex.join(BOOT_ARGV)]

    def default_workdir(self) -> str:
        digest = hashlib.sha256(str(self.cwd).encode()).hexdigest()[:8]
        return f"~/.talaria/work/{self.cwd.name or 'root'}-{digest}"

    async def start(self, base: Workspace) -> Workspace:
        if self.mux is None or self.mux.lost:
            if self.ssh is None:
                raise EnvError("ssh is not installed (OpenSSH client); install it or use "
                               "another environment")
            self.mux = await Mux.open(self.helper_argv(), f"ssh {self.host}")
            self.workdir = PurePosixPath(await self.mux.call(
                "mkdir", path=self.settings["workdir"] or self.default_workdir()))
            if self.synced_at is None:  # a reconnection must not overwrite what was done there
                await self.sync_up()
        assert self.workdir is not None
        if self.workspace is None or self.workspace.mux is not self.mux:
            self.workspace = RemoteWorkspace(self.mux, PathMap(self.cwd, self.workdir), base)
        return self.workspace

    # -- sync ----------------------------------------------------------------------------

    def use_rsync(self) -> bool:
        assert self.mux is not None
        mode = self.settings["sync"]
        both = bool(shutil.which("rsync")) and bool(self.mux.facts.get("rsync"))
        if mode == "rsync" and not both:
            raise EnvError(f"sync = rsync but rsync is missing {'here' if not shutil.which('rsync') else 'on ' + self.host}")
        return mode == "rsync" or mode == "auto" and both

    def rsync_argv(self, src: str, dst: str) -> list[str]:
        shell = shlex.join([str(self.ssh), *self.ssh_options()])
        excludes = [f"--exclude={d}" for d in SYNC_SKIP]
        return ["rsync", "-a", "--no-owner", "--no-group", "-e", shell, *excludes, src, dst]

    async def sync_up(self) -> None:
        await anyio.to_thread.run_sync(self.sync_up_blocking)

    def sync_up_blocking(self) -> None:
        """Copy the project to the workdir; remember the remote clock after it."""
        assert self.mux is not None and self.workdir is not None
        if self.use_rsync():
            argv = self.rsync_argv(f"{self.cwd}/", f"{self.host}:{self.workdir}/")
            done = subprocess.run(argv, capture_output=True, text=True, timeout=SYNC_TIMEOUT_S)
            if done.returncode != 0:
                raise EnvError(f"rsync to {self.host} failed: {done.stderr.strip()[-300:]}")
        else:
            stream, reply = self.mux.inbox(), self.mux.inbox()
            self.mux.drop(stream[0])  # the helper reads this stream; nothing comes back on it
            try:
                self.mux.send_json({"op": "tar_in", "root": str(self.workdir),
                                    "stream": stream[0], "reply": reply[0]})
                self.mux.send_data(stream[0], self._pack())
                self.mux.send_data(stream[0], None)
                answer = reply[1].read_all_blocking(SYNC_TIMEOUT_S)
            finally:
                self.mux.drop(reply[0])
            if b'"error"' in answer:
                raise EnvError(f"copying the project to {self.host} failed: {answer.decode()[:300]}")
        self.synced_at = float(self.mux.request_blocking({"op": "call", "fn": "now"}))

    def _pack(self) -> bytes:
        buffer = io.BytesIO()

        def skip(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
            return None if Path(info.name).name in SYNC_SKIP else info

        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for entry in sorted(os.listdir(self.cwd)):
                tar.add(self.cwd / entry, arcname=entry, filter=skip)
        return buffer.getvalue()

    def sync_back(self) -> list[str]:
        """Bring files changed on the host since the copy into the project; their paths.
        Blocking (a session closes from synchronous code)."""
        mux = self.mux
        if mux is None or mux.lost or self.synced_at is None:
            return []
        assert self.workdir is not None
        paths = mux.request_blocking({"op": "call", "fn": "changed", "args": {
            "root": str(self.workdir), "since": self.synced_at, "skip": list(SYNC_SKIP)}})
        if not paths:
            return []
        stream, box = mux.inbox()
        try:
            mux.send_json({"op": "tar_out", "root": str(self.workdir), "paths": paths,
                           "reply": stream})
            data = box.read_all_blocking(SYNC_TIMEOUT_S, MAX_SYNC_BACK_BYTES)
        finally:
            mux.drop(stream)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(self.cwd, filter="data")
        self.synced_at = float(mux.request_blocking({"op": "call", "fn": "now"}))
        return [str(p) for p in paths]

    def close(self) -> None:
        mux = self.mux
        if mux is None:
            return
        try:
            self.sync_back()
        except Exception as exc:  # the session ends anyway; say what was not brought back
            import logging

            logging.getLogger(__name__).warning("ssh %s: edits not brought back: %s", self.host, exc)
        self.mux = None
        mux.close()
        if self.ssh:
            subprocess.run([self.ssh, *self.ssh_options(), "-O", "exit", self.host],
                           capture_output=True, timeout=10)
