"""A real Ray cluster on this machine for tests and benchmarks: a head and worker nodes, each
a `ray start --block` in its own process group, advertised on loopback, dashboard off.

    with RayCluster(nodes=2, cpus=2) as cluster:
        run_batch(BatchOptions(..., executor="ray", address=cluster.address))
        cluster.kill_node(1)          # kill -9 of a worker node's whole process group

Ray binds loopback only where it lets itself be told: `--node-ip-address=127.0.0.1` is what
nodes advertise and dial, and there is no dashboard. Its gRPC servers (GCS, each raylet,
each worker and driver) still listen on every interface and its runtime-env agent on the
machine's address: Ray 2.x has no setting for that (`listening()` reports what is open; on a
shared host keep the ports behind a firewall). Node death is noticed within a few seconds
(health checks every HEALTH_PERIOD_MS). Stopping kills only this cluster's process groups,
never other Ray instances on the machine (no `ray stop`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

START_TIMEOUT_S = 180.0
HEALTH_PERIOD_MS = 1000
HEALTH_FAILURES = 3


def ray_binary() -> str | None:
    here = Path(sys.executable).parent / "ray"
    return str(here) if here.exists() else shutil.which("ray")


def missing() -> str | None:
    """Why a cluster cannot start here, or None."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return "ray is not installed (pip install 'ray>=2.9')"
    return None if ray_binary() else "the ray command is not on PATH"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RayCluster:
    def __init__(self, *, nodes: int = 2, cpus: int = 1) -> None:
        self.nodes = nodes
        self.cpus = cpus
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        # Short: Ray's Unix socket paths live under it (108 bytes at most).
        self.temp = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))
        self.procs: list[subprocess.Popen[bytes]] = []
        self.env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0",
                    "RAY_health_check_period_ms": str(HEALTH_PERIOD_MS),
                    "RAY_health_check_timeout_ms": str(HEALTH_PERIOD_MS),
                    "RAY_health_check_failure_threshold": str(HEALTH_FAILURES)}
        self.start_s = 0.0
        """Seconds from the first `ray start` to every node alive."""

    def _start(self, *args: str) -> None:
        ray = ray_binary()
        assert ray is not None
        log = (self.temp / f"node-{len(self.procs)}.log").open("wb")
        self.procs.append(subprocess.Popen(
            [ray, "start", "--block", "--node-ip-address=127.0.0.1", f"--num-cpus={self.cpus}",
             "--disable-usage-stats", *args],
            env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True))

    def __enter__(self) -> RayCluster:
        started = time.monotonic()
        self._start("--head", f"--port={self.port}", "--include-dashboard=false",
                    f"--temp-dir={self.temp}")
        try:
            for _ in range(self.nodes - 1):
                self._start(f"--address={self.address}")
            self.wait_nodes(self.nodes)
        except BaseException:
            self.__exit__()
            raise
        self.start_s = time.monotonic() - started
        return self

    def alive_nodes(self) -> int:
        """Nodes the GCS counts alive (a short-lived driver asks it)."""
        code = ("import ray, sys; ray.init(address=sys.argv[1], log_to_driver=False, "
                "logging_level='ERROR'); print(sum(n['Alive'] for n in ray.nodes()))")
        done = subprocess.run([sys.executable, "-c", code, self.address], capture_output=True,
                              text=True, env=self.env, timeout=120)
        lines = done.stdout.strip().splitlines()
        return int(lines[-1]) if done.returncode == 0 and lines and lines[-1].isdigit() else 0

    def wait_nodes(self, count: int, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i, proc in enumerate(self.procs):
                if proc.poll() is not None:
                    log = (self.temp / f"node-{i}.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"ray node {i} exited {proc.returncode}: {log}")
            if self.alive_nodes() >= count:
                return
            time.sleep(1)
        raise TimeoutError(f"{count} Ray nodes not alive after {timeout:g}s")

    def kill_node(self, index: int) -> None:
        """SIGKILL every process of node `index` at once: its process group and every
        descendant (Ray's workers run in sessions of their own, under the raylet)."""
        proc = self.procs[index]
        doomed = descendants(proc.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def listening(self) -> list[dict[str, Any]]:
        """The TCP sockets this cluster's processes listen on: {process, address, port}."""
        groups = {p.pid for p in self.procs}
        inodes: dict[str, str] = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                if os.getpgid(int(pid)) not in groups:
                    continue
                name = Path(f"/proc/{pid}/comm").read_text().strip()
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if link.startswith("socket:["):
                        inodes[link[8:-1]] = name
            except OSError:
                continue
        out = []
        for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                    continue
                host, port = fields[1].split(":")
                out.append({"process": inodes[fields[9]], "address": _address(host, v6),
                            "port": int(port, 16)})
        return out

    def __exit__(self, *exc: object) -> None:
        for index in reversed(range(len(self.procs))):
            if self.procs[index].poll() is None:
                self.kill_node(index)
        shutil.rmtree(self.temp, ignore_errors=True)


def descendants(root: int) -> list[int]:
    """Every process below `root` (by parent pid), whatever its session."""
    return sorted(process_tree({root}) - {root})


def process_tree(roots: set[int]) -> set[int]:
    """The live processes among `roots` and every process below them (by parent pid)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                parents[int(entry)] = int(stat[stat.rindex(")") + 2:].split()[1])
            except (OSError, ValueError):
                continue
    found = roots & set(parents)
    grew = True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return found


def _address(hex_host: str, v6: bool) -> str:
    raw = bytes.fromhex(hex_host)
    if not v6:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words)
