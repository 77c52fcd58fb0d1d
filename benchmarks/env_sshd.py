"""A real OpenSSH server on a loopback port, with throwaway host and user keys, for the ssh
environment's tests and benchmarks.

    with Sshd(tmp) as server:
        table = server.table(workdir=...)   # [environments.ssh] settings that reach it

Host key checking stays on: `known_hosts` holds this server's key (or, with `wrong_key`,
another one, to see the connection refused).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def missing() -> str | None:
    if not os.path.exists(SSHD):
        return "openssh-server is not installed (scripts/test installs it)"
    if not shutil.which("ssh") or not shutil.which("ssh-keygen"):
        return "the OpenSSH client is not installed"
    if os.geteuid() != 0:
        return "sshd's privilege separation needs root here"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().strip() if path.suffix else Path(f"{path}.pub").read_text().strip()


class Sshd:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Sshd:
        d = self.dir
        d.mkdir(parents=True, exist_ok=True)
        self.host_pub = keygen(d / "host_key")
        self.other_pub = keygen(d / "other_host_key")
        user_pub = keygen(d / "id_user")
        (d / "authorized_keys").write_text(user_pub + "\n")
        (d / "sshd_config").write_text("\n".join([
            f"Port {self.port}", "ListenAddress 127.0.0.1", f"HostKey {d / 'host_key'}",
            f"AuthorizedKeysFile {d / 'authorized_keys'}", "PermitRootLogin prohibit-password",
            "StrictModes no", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
            "UsePAM no", f"PidFile {d / 'sshd.pid'}", "LogLevel ERROR", "MaxSessions 50",
            "MaxStartups 50", "",
        ]))
        Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation directory
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")],
                                     stderr=open(d / "sshd.log", "wb"))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"sshd did not listen: {(d / 'sshd.log').read_text()}")
        self.known_hosts(wrong_key=False)
        return self

    def known_hosts(self, *, wrong_key: bool) -> Path:
        path = self.dir / ("known_hosts_wrong" if wrong_key else "known_hosts")
        key = self.other_pub if wrong_key else self.host_pub
        path.write_text(f"[127.0.0.1]:{self.port} {' '.join(key.split()[:2])}\n")
        return path

    def table(self, *, workdir: Path, wrong_key: bool = False, **more: Any) -> dict[str, Any]:
        """`[environments.ssh]` settings for this server."""
        return {"host": "127.0.0.1", "port": self.port, "user": "root",
                "identity": str(self.dir / "id_user"), "workdir": str(workdir),
                "options": [f"UserKnownHostsFile={self.known_hosts(wrong_key=wrong_key)}",
                            "IdentitiesOnly=yes", "IdentityAgent=none",
                            "GlobalKnownHostsFile=/dev/null"], **more}

    def sessions(self) -> list[int]:
        """Pids of the per-connection sshd processes (children of the listener)."""
        assert self.proc is not None
        out = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == self.proc.pid:
                out.append(int(entry))
        return out

    def drop_connections(self) -> None:
        """Kill every open connection (the server keeps listening)."""
        for pid in self.sessions():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.drop_connections()
            self.proc.terminate()
            self.proc.wait(5)
