"""Docker / Podman: a long-lived container per session (or per batch task), project mounted.

The container runs an idle loop; the environment helper runs in it through one `exec -i`, and
every command is a process group the helper starts (so `terminal` costs a frame, not an
`exec`). The project (and each additional directory of the session) is bind-mounted at its
own path: files are the door's files (the editor's
`fs/*` still sees each read and write) and paths mean the same inside and out. Limits: CPUs,
memory, pids, disk where the storage driver supports it; no network unless configured.

`persistent = true`: the container is named after the project and only stopped on close, and
a named volume (`cache`, default /root/.cache) keeps caches; `.venv`, `node_modules` and build
dirs live in the mounted project anyway. Otherwise it is removed on close. Containers are
labelled with the agent that made them: one whose agent is gone (killed, crashed) is removed
by the next start, on this machine (`reap_orphans`).
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
import threading
from pathlib import Path, PurePosixPath

import anyio

from talaria.tools import procs
from talaria.tools.environments.execs import ExecCommands
from talaria.tools.environments.mux import BOOT_ARGV, Mux
from talaria.tools.environments.remote import HelperCommands, PathMap, SplitWorkspace
from talaria.tools.environments.spec import EnvSpec
from talaria.tools.errors import EnvError
from talaria.tools.workspace import Workspace

log = logging.getLogger(__name__)

LABEL = "talaria.environment"
"""Every container Talaria starts carries it (value: the environment's name)."""
ENGINES = ("podman", "docker")
ENGINE_TIMEOUT_S = 120.0
"""For one engine command (`run`, `rm`...): a cold engine can be slow, a hung one is an error."""
IDLE_LOOP = "trap 'exit 0' TERM INT; while :; do sleep 86400 & wait $!; done"
"""The container's main process: stays up, stops at once on `stop`."""


def find_engine(preferred: str | None) -> str:
    """The engine's executable; EnvError when none is installed."""
    for name in (preferred,) if preferred else ENGINES:
        path = shutil.which(name or "")
        if path:
            return path
    wanted = preferred or "podman or docker"
    raise EnvError(f"no container engine found ({wanted} is not on PATH); install it, "
                   "or use another environment")


def engine_run(argv: list[str], timeout: float = ENGINE_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise EnvError(f"{Path(argv[0]).name} {argv[1]} did not finish in {timeout:g} s") from None
    except OSError as exc:
        raise EnvError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"


def project_key(cwd: Path, extra: tuple[Path, ...] = ()) -> str:
    return hashlib.sha256("\0".join(map(str, (cwd, *extra))).encode()).hexdigest()[:12]


def reap_orphans(engine: str) -> list[str]:
    """Remove the non-persistent containers whose agent is gone; their names."""
    fmt = ('{{.Names}}\t{{index .Labels "talaria.agent"}}\t{{index .Labels "talaria.boot"}}'
           '\t{{index .Labels "talaria.persistent"}}')
    listed = engine_run([engine, "ps", "-a", "--filter", f"label={LABEL}", "--format", fmt])
    if listed.returncode != 0:
        return []
    boot, gone = procs.boot_id(), []
    for line in listed.stdout.splitlines():
        name, agent, container_boot, persistent = (line.split("\t") + ["", "", ""])[:4]
        if persistent == "1" or not name:
            continue
        if container_boot != boot or not procs.alive(agent):
            gone.append(name.strip())
    if gone:
        engine_run([engine, "rm", "-f", "-t", "0", *gone])
    return gone


class DockerEnvironment:
    shares_files = True

    def __init__(self, spec: EnvSpec, *, cwd: Path, session_id: str,
                 extra: tuple[Path, ...] = ()) -> None:
        self.spec = spec
        self.cwd = cwd
        self.extra = extra
        """The session's additional directories: bind-mounted at their own paths too."""
        self.settings = spec.settings
        self.persistent = bool(self.settings["persistent"])
        # A persistent container keeps its mounts: other directories need another container.
        key = project_key(cwd, extra)
        self.name = f"talaria-p-{key}" if self.persistent else f"talaria-{session_id[:16]}"
        self.volume = f"talaria-cache-{project_key(cwd)}"
        self.engine: str | None = None
        self.mux: Mux | None = None
        self.execs: ExecCommands | None = None
        """Set when the image has no python3: commands then run by one exec each."""

    @property
    def where(self) -> str:
        return f"container {self.name} ({Path(self.engine or 'podman').name})"

    def run_argv(self, engine: str) -> list[str]:
        """The `run` command that creates this session's container."""
        s = self.settings
        argv = [engine, "run", "-d", "--name", self.name,
                "--label", f"{LABEL}={self.spec.name}", "--label", f"talaria.agent={procs.marker()}",
                "--label", f"talaria.boot={procs.boot_id()}",
                "--label", f"talaria.persistent={int(self.persistent)}",
                "-v", f"{self.cwd}:{self.cwd}", "-w", str(self.cwd),
                *(arg for d in self.extra for arg in ("-v", f"{d}:{d}")),
                "--cpus", str(s["cpus"]), "--memory", str(s["memory"]),
                "--pids-limit", str(s["pids"])]
        if not s["network"]:
            argv += ["--network", "none"]
        if s["disk"]:
            argv += ["--storage-opt", f"size={s['disk']}"]
        if self.persistent:
            argv += ["-v", f"{self.volume}:{s['cache']}"]
        return [*argv, "--entrypoint", "/bin/sh", s["image"], "-c", IDLE_LOOP]

    async def start(self, base: Workspace) -> Workspace:
        if self.execs is not None:
            return SplitWorkspace(base, self.execs)
        if self.mux is None or self.mux.lost:
            await anyio.to_thread.run_sync(self._up)
            assert self.engine is not None
            try:
                self.mux = await Mux.open([self.engine, "exec", "-i", self.name, *BOOT_ARGV],
                                          self.where)
            except EnvError:
                if await anyio.to_thread.run_sync(self._has_python):
                    raise
                log.warning("%s: the image has no python3: commands run by one exec each, and "
                            "execute_code cannot run there", self.where)
                self.execs = ExecCommands(self.engine, self.name)
                return SplitWorkspace(base, self.execs)
        return SplitWorkspace(base, HelperCommands(self.mux, PathMap(self.cwd, PurePosixPath(self.cwd))))

    def _has_python(self) -> bool:
        """Whether the image has a python3 >= 3.8 for the helper."""
        assert self.engine is not None
        probe = engine_run([self.engine, "exec", self.name, "python3", "-c",
                            "import sys; sys.exit(sys.version_info < (3, 8))"])
        return probe.returncode == 0

    def _up(self) -> None:
        """Create (or, persistent, restart) the container. Blocking: run in a thread."""
        engine = self.engine = find_engine(self.settings["engine"])
        try:
            self._start_or_create(engine)
        finally:
            # After, not alongside: podman serializes its commands on one lock, so the reaper's
            # `ps` delayed this session's `start` by its whole length (~0.1-0.3 s).
            threading.Thread(target=reap_orphans, args=(engine,), daemon=True).start()

    def _start_or_create(self, engine: str) -> None:
        if self.persistent:  # most often it is there, stopped: one command instead of two
            started = engine_run([engine, "start", self.name])
            if started.returncode == 0:
                return
        state = self._state(engine)
        if state is not None:
            if state != "running":
                started = engine_run([engine, "start", self.name])
                if started.returncode != 0:
                    raise EnvError(f"{self.where}: start failed: {last_line(started.stderr)}")
            return
        image = self.settings["image"]
        if engine_run([engine, "image", "inspect", image]).returncode != 0:
            raise EnvError(f"image {image!r} not found in {Path(engine).name} (it is never pulled "
                           f"on its own: `{Path(engine).name} pull {image}` or build it, or set "
                           "[environments.docker] image)")
        made = engine_run(self.run_argv(engine))
        if made.returncode != 0:
            raise EnvError(f"{Path(engine).name} run failed: {last_line(made.stderr)}")

    def _state(self, engine: str) -> str | None:
        found = engine_run([engine, "inspect", "--type", "container", "--format",
                            "{{.State.Status}}", self.name])
        return found.stdout.strip() or "unknown" if found.returncode == 0 else None

    def close(self) -> None:
        mux, self.mux, self.execs = self.mux, None, None
        if mux is not None:
            mux.close()
        if self.engine is None:
            return
        if self.persistent:
            engine_run([self.engine, "stop", "-t", "2", self.name])
        else:
            engine_run([self.engine, "rm", "-f", "-t", "0", self.name])
        self.engine = None
