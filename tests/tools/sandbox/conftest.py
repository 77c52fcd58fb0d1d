"""What the sandbox tests share: the tiers this machine has, processes to spawn in them, and
a way to run as an unprivileged user (tests of what root is not bounded by otherwise)."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from talaria.tools import procs
from talaria.tools.sandbox import cgroup
from talaria.tools.sandbox import tiers as sandbox
from talaria.tools.sandbox.tiers import SandboxSpec, prepare
from tests import TESTS, processes
from tests.exec_helpers import PATIENCE_S

PROBE = TESTS / "sandbox_probe.py"
ROOT = os.geteuid() == 0
NOBODY = 65534
MiB = 1024**2
PR_SET_CHILD_SUBREAPER = 36


def available() -> list[str]:
    tiers = []
    if sandbox._bwrap_works():
        tiers.append("bubblewrap")
    if sandbox.landlock_abi() >= 1:
        tiers.append("landlock")
    return [*tiers, "rlimits"]


TIERS = available()
CONFINED = {"bubblewrap", "landlock"}
PIDS_CGROUP = ROOT and cgroup.base() is not None
"""Root bounds processes with a pids cgroup outside bwrap, where this machine lets it."""


@pytest.fixture(params=TIERS)
def tier(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def outside(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A dir outside the sandbox's writable dirs and outside /tmp (bwrap replaces /tmp), holding
    a fake HOME with a secret, and a fake TALARIA_HOME with credentials."""
    base = Path(tempfile.mkdtemp(prefix="talaria-sbx-test-", dir="/var/tmp"))
    home = base / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_test").write_text("SECRET KEY\n")
    (home / "notes.txt").write_text("not a secret\n")
    (home / ".talaria").mkdir()
    (home / ".talaria" / "credentials").write_text("OPENAI_API_KEY=sk-secret\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("TALARIA_HOME", raising=False)
    yield base
    subprocess.run(["rm", "-rf", str(base)], check=False)


@pytest.fixture
def reaper() -> Iterator[None]:
    """Orphans of the test (killed sandboxes' children) reparent to pytest and get reaped:
    this container's PID 1 never reaps, and zombies would count against RLIMIT_NPROC."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    # Children that earlier tests left running (a shared kernel, a server) are not this test's.
    before = set(orphans())
    try:
        yield
    finally:
        deadline = time.monotonic() + PATIENCE_S
        while time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                if not set(orphans()) - before:
                    break
                time.sleep(0.02)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        left = set(orphans()) - before
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        assert not left, f"the sandbox left processes running: {sorted(left)}"


def orphans() -> list[int]:
    """Children of this process but the agent's watchdog (talaria.tools.procs), which lives as
    long as the test process does."""
    watchdog = procs._watchdog.pid if procs._watchdog is not None else None
    me, out = os.getpid(), []
    for proc in processes():
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == me and int(proc.name) != watchdog:
            out.append(int(proc.name))
    return out


def spawn(tier: str, checks: list[str], spec: SandboxSpec, *, python: str = sys.executable,
          pass_fds: tuple[int, ...] = (), user: int | None = None, **popen) -> subprocess.Popen:
    prepared = prepare([python, "-I", "-S", str(PROBE), *checks], spec, tier=tier,
                       pass_fds=pass_fds)
    assert prepared.tier == tier and prepared.preexec_fn is None
    ids = {"user": user, "group": user, "extra_groups": []} if user is not None else {}
    popen.setdefault("stdout", subprocess.PIPE)
    return subprocess.Popen(prepared.argv, preexec_fn=prepared.preexec_fn, pass_fds=pass_fds,
                            start_new_session=True, **ids, **popen)


def run(tier: str, checks: list[str], spec: SandboxSpec, timeout: float = 20,
        **kw) -> dict[str, dict]:
    proc = spawn(tier, checks, spec, stderr=subprocess.PIPE, **kw)
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err.decode()
    results = [json.loads(line) for line in out.decode().splitlines()]
    return {r["check"]: r for r in results}


def live(tag: str) -> list[int]:
    """Non-zombie processes whose command line holds `tag`."""
    pids = []
    for proc in processes():
        try:
            cmdline = (proc / "cmdline").read_bytes()
            state = (proc / "stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if tag.encode() in cmdline and state != b"Z" and proc.name != str(os.getpid()):
            pids.append(int(proc.name))
    return pids


def processes_of(uid: int) -> list[str]:
    """`pid state command` of each process (zombies too) whose real user is `uid`."""
    found = []
    for proc in processes():
        try:
            fields = dict(line.split(":", 1) for line in (proc / "status").read_text().splitlines()
                          if ":" in line)
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            found.append(f"{proc.name} {fields['State'].split()[0]} "
                         f"{cmdline.decode(errors='replace')[:80]}")
    return found


def wait_gone(tag: str, timeout: float = PATIENCE_S) -> list[int]:
    deadline = time.monotonic() + timeout
    while (pids := live(tag)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return pids


def nobody_python() -> str | None:
    """An interpreter `nobody` can run (pyenv's lives under /root here)."""
    for python in (sys.executable, "/usr/bin/python3"):
        try:
            done = subprocess.run([python, "-I", "-S", "-c", "import ctypes"], user=NOBODY,
                                  group=NOBODY, extra_groups=[], cwd="/", capture_output=True)
        except OSError:
            continue
        if done.returncode == 0:
            return python
    return None


def become_nobody(monkeypatch: pytest.MonkeyPatch) -> tuple[dict, Path]:
    """Popen kwargs to run a sandbox as `nobody`, and a dir nobody may write (pytest's is
    root-only); skips when this machine cannot."""
    if not ROOT:
        pytest.skip("already not root")
    python = nobody_python()
    if python is None:
        pytest.skip("no interpreter that nobody can run")
    monkeypatch.setattr(sandbox, "PYTHON", python)
    workdir = Path(tempfile.mkdtemp(dir="/var/tmp"))
    workdir.chmod(0o777)
    monkeypatch.setenv("HOME", str(workdir))  # hidden paths nobody cannot reach break bwrap
    monkeypatch.delenv("TALARIA_HOME", raising=False)
    return {"python": python, "user": NOBODY, "cwd": "/"}, workdir
