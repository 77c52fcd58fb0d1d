"""The sandbox conformance suite: every attack in tests/sandbox_probe.py, on every tier here.

Each tier is asserted to contain exactly what the table in tools/sandbox.py promises. The tests
run real processes: bwrap, Landlock, seccomp, rlimits. As root, "not permitted" never comes
from permission bits: only mounts, Landlock and seccomp stop root.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from talaria.tools.sandbox import tiers as sandbox
from talaria.tools.sandbox.tiers import Limits, SandboxSpec
from tests.exec_helpers import PATIENCE_S
from tests.tools.sandbox.conftest import (
    CONFINED,
    NOBODY,
    PIDS_CGROUP,
    ROOT,
    TIERS,
    MiB,
    become_nobody,
    live,
    processes_of,
    run,
    spawn,
    wait_gone,
)


def test_conformance(tier: str, tmp_path: Path, outside: Path) -> None:
    """One probe run per tier: filesystem, secrets, network, Unix sockets, the inherited fd,
    signals, root's powers."""
    home = outside / "home"
    project = tmp_path / "project"
    project.mkdir()
    etc_file = Path(f"/etc/talaria-test-{secrets.token_hex(4)}")
    host_sock = socket.socket(socket.AF_UNIX)
    host_sock.bind(str(outside / "host.sock"))
    abstract = socket.socket(socket.AF_UNIX)
    abstract_name = f"talaria-test-{secrets.token_hex(4)}"
    abstract.bind("\0" + abstract_name)
    tcp = socket.create_server(("127.0.0.1", 0))
    for s in (host_sock, abstract):
        s.listen()
    ours, theirs = socket.socketpair()
    ours.sendall(b"ping\n")
    pty, tty = os.openpty()
    confined = tier in CONFINED
    expect = {  # check -> whether the attack (or legitimate use) succeeds
        f"write={etc_file}": ROOT and not confined,
        f"write={home / 'x'}": not confined,
        f"write={project / 'ok.txt'}": True,
        f"read={home / '.ssh' / 'id_test'}": not confined,
        f"read={home / '.talaria' / 'credentials'}": not confined,
        f"read={home / 'notes.txt'}": True,
        f"tcp=127.0.0.1:{tcp.getsockname()[1]}": not confined,
        f"unix={outside / 'host.sock'}": not confined,
        f"abstract={abstract_name}": not confined,
        "dgram_pair": not confined,
        f"echo={theirs.fileno()}": True,
        f"signal={os.getpid()}": tier == "rlimits" or (tier == "landlock"
                                                       and sandbox.landlock_abi() < 6),
        "caps": ROOT and not confined,
        "sysctl_write": ROOT and not confined,
        "remount": ROOT and not confined,
        "tiocsti": ROOT and not confined,  # needs CAP_SYS_ADMIN without a controlling tty
        "setsid": tier != "landlock",
        "tmpfile": True,
    }
    try:
        r = run(tier, list(expect), SandboxSpec(writable=(project,)),
                pass_fds=(theirs.fileno(),), env={**os.environ, "TMPDIR": str(outside)},
                stdin=tty)
        echoed = ours.recv(100)
    finally:
        for s in (host_sock, abstract, tcp, ours, theirs):
            s.close()
        os.close(pty)
        os.close(tty)
        etc_file.unlink(missing_ok=True)
    assert {check: r[check]["ok"] for check in expect} == expect, r
    assert echoed == b"ping\n"
    assert (project / "ok.txt").read_text() == "probe\n"


@pytest.mark.parametrize("confined_tier", [t for t in TIERS if t in CONFINED])
def test_network_when_configured(confined_tier: str, tmp_path: Path) -> None:
    """Only confining tiers have a network switch (rlimits never blocks the network)."""
    tier = confined_tier
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        r = run(tier, [f"tcp=127.0.0.1:{port}", f"unix={tmp_path}/none.sock"],
                SandboxSpec(writable=(tmp_path,), network=True))
    assert r[f"tcp=127.0.0.1:{port}"]["ok"]
    assert "EPERM" in r[f"unix={tmp_path}/none.sock"]["error"]  # Unix sockets stay closed


def test_memory_limit(tier: str, tmp_path: Path) -> None:
    spec = SandboxSpec(writable=(tmp_path,), limits=Limits(memory_bytes=512 * MiB))
    r = run(tier, [f"alloc={4 * 1024**3}", f"alloc={64 * MiB}"], spec)
    assert "MemoryError" in r[f"alloc={4 * 1024**3}"]["error"]
    assert r[f"alloc={64 * MiB}"]["ok"]


def test_cpu_limit_kills_a_busy_loop(tier: str, tmp_path: Path) -> None:
    spec = SandboxSpec(writable=(tmp_path,), limits=Limits(cpu_seconds=1))
    proc = spawn(tier, ["spin"], spec)
    proc.communicate(timeout=PATIENCE_S)  # one CPU-second, however loaded the machine
    # Killed by SIGXCPU (directly, or reported by bwrap as 128 + signal).
    assert proc.returncode in (-signal.SIGXCPU, 128 + signal.SIGXCPU)


def test_file_size_limit(tier: str, tmp_path: Path) -> None:
    spec = SandboxSpec(writable=(tmp_path,), limits=Limits(file_size_bytes=1 * MiB))
    r = run(tier, [f"bigfile={tmp_path}/big:{2 * MiB}", f"bigfile={tmp_path}/small:{MiB // 2}"],
            spec)
    assert "EFBIG" in r[f"bigfile={tmp_path}/big:{2 * MiB}"]["error"]
    assert r[f"bigfile={tmp_path}/small:{MiB // 2}"]["ok"]


def test_large_output_is_drained(tier: str, tmp_path: Path) -> None:
    size = 100 * MiB
    proc = spawn(tier, [f"spew={size}"], SandboxSpec(writable=(tmp_path,)))
    assert proc.stdout is not None
    total, deadline = 0, time.monotonic() + 20
    while chunk := proc.stdout.read1(1 << 20):
        total += len(chunk)  # read and discard, as the exec tool does past its cap
        assert time.monotonic() < deadline
    assert proc.wait(timeout=5) == 0
    assert total >= size


# RLIMIT_NPROC counts every process of the user: two workers' bombs as nobody at once would
# share the 64, so every test that runs as nobody is on one worker.
@pytest.mark.xdist_group("nobody")
@pytest.mark.parametrize("as_nobody", [False, True], ids=["caller", "nobody"])
def test_fork_bomb_is_contained(tier: str, as_nobody: bool, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch, reaper: None) -> None:
    """Bounded where the tier promises it; everywhere, killing the group ends it all."""
    limit = 64
    kwargs: dict = {}
    # Root: RLIMIT_NPROC does not apply; bwrap's PID namespace gets its own pid_max instead,
    # the other tiers a pids cgroup.
    per_ns_pid_max = sandbox._kernel() >= sandbox.PER_NS_PID_MAX
    by_cgroup = tier != "bubblewrap" and PIDS_CGROUP
    bounded = not ROOT or (tier == "bubblewrap" and per_ns_pid_max) or by_cgroup
    bound = 301 if ROOT and not by_cgroup else limit  # 301: the kernel's floor for pid_max
    nobody_before: list[str] = []
    if as_nobody:
        kwargs, tmp_path = become_nobody(monkeypatch)
        bounded, bound = True, limit
        # RLIMIT_NPROC counts all of nobody's processes, zombies too: start from none.
        deadline = time.monotonic() + PATIENCE_S
        while (nobody_before := processes_of(NOBODY)) and time.monotonic() < deadline:
            time.sleep(0.05)
    tag = f"tag=talaria-fork-{secrets.token_hex(4)}"
    spec = SandboxSpec(writable=(tmp_path,), limits=Limits(processes=limit))
    attempts = 1000 if bounded else 200  # unbounded: be gentle with the machine
    proc = spawn(tier, [tag, f"fork={attempts}", "sleep=60"], spec, **kwargs)
    try:
        assert proc.stdout is not None
        report = json.loads(proc.stdout.readline())
        forked = report["forked"]
        assert (0 < forked <= bound) if bounded else (forked == attempts), \
            (report, f"nobody had {nobody_before} processes before")
        assert len(live(tag)) >= forked
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)
    assert wait_gone(tag) == []
    assert subprocess.run(["true"]).returncode == 0  # the machine still forks
    if as_nobody:
        subprocess.run(["rm", "-rf", str(tmp_path)], check=False)


TMP_BOUND = 8 * MiB


def test_temp_files_are_bounded_by_a_private_tmpfs(tier: str, tmp_path: Path) -> None:
    """bwrap, or root elsewhere (a mount namespace of the sandbox's own): TMPDIR and (bwrap)
    /tmp are tmpfs of `tmp_bytes`; a write past it fails with ENOSPC; the host sees nothing."""
    if tier != "bubblewrap" and not ROOT:
        pytest.skip("only root may mount outside bwrap: see the supervisor test")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    spec = SandboxSpec(writable=(tmp_path,), tmp=scratch, limits=Limits(tmp_bytes=TMP_BOUND))
    checks = [f"tmpfill=TMPDIR:4:{4 * MiB}"]
    if tier == "bubblewrap":
        checks.append(f"tmpfill=/tmp:4:{4 * MiB}")
    r = run(tier, checks, spec)
    for check in checks:
        assert r[check]["error"] == "ENOSPC"
        assert TMP_BOUND - MiB <= r[check]["written"] <= TMP_BOUND
    assert list(scratch.iterdir()) == [], "written in the sandbox's own tmpfs, not on the host"
    r = run(tier, [f"tmpfill=TMPDIR:1:{2 * MiB}"], spec)  # a fresh tmpfs for each sandbox
    assert r[f"tmpfill=TMPDIR:1:{2 * MiB}"]["written"] == 2 * MiB


@pytest.mark.xdist_group("nobody")
@pytest.mark.parametrize("confined_tier", [t for t in TIERS if t != "bubblewrap"])
def test_temp_files_past_the_bound_stop_the_sandbox(confined_tier: str,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    reaper: None) -> None:
    """Not root outside bwrap (no mount): the supervisor measures TMPDIR and stops the sandbox
    once it grows past the bound, saying why on stderr."""
    kwargs, workdir = become_nobody(monkeypatch)
    scratch = workdir / "scratch"
    scratch.mkdir()
    scratch.chmod(0o777)
    spec = SandboxSpec(writable=(workdir,), tmp=scratch, limits=Limits(tmp_bytes=TMP_BOUND))
    try:
        proc = spawn(confined_tier, [f"tmpfill=TMPDIR:4:{4 * MiB}", "sleep=30"], spec,
                     stderr=subprocess.PIPE, **kwargs)
        _, err = proc.communicate(timeout=20)  # killed while writing, or while sleeping
        assert proc.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL)
        assert b"temporary files passed the limit of 8,388,608 bytes" in err
    finally:
        subprocess.run(["rm", "-rf", str(workdir)], check=False)
