"""The sandbox conformance suite: every attack in tests/sandbox_probe.py, on every tier here.

Each tier is asserted to contain exactly what the table in tools/sandbox.py promises. The tests
run real processes: bwrap, Landlock, seccomp, rlimits. As root, "not permitted" never comes
from permission bits: only mounts, Landlock and seccomp stop root.
"""

from __future__ import annotations

import ctypes
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from talaria.tools import procs
from talaria.tools.sandbox import bytecode, cgroup
from talaria.tools.sandbox import tiers as sandbox
from talaria.tools.sandbox.tiers import Limits, SandboxSpec, prepare
from tests import ROOT as REPO
from tests import TESTS
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
                if not orphans():
                    break
                time.sleep(0.02)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def orphans() -> list[int]:
    """Children of this process but the agent's watchdog (talaria.tools.procs), which lives as
    long as the test process does."""
    watchdog = procs._watchdog.pid if procs._watchdog is not None else None
    me, out = os.getpid(), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == me and int(stat.parent.name) != watchdog:
            out.append(int(stat.parent.name))
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
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            cmdline = (stat.parent / "cmdline").read_bytes()
            state = stat.read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if tag.encode() in cmdline and state != b"Z" and stat.parent.name != str(os.getpid()):
            pids.append(int(stat.parent.name))
    return pids


def wait_gone(tag: str, timeout: float = PATIENCE_S) -> list[int]:
    deadline = time.monotonic() + timeout
    while (pids := live(tag)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return pids


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
    if as_nobody:
        kwargs, tmp_path = become_nobody(monkeypatch)
        bounded, bound = True, limit
    tag = f"tag=talaria-fork-{secrets.token_hex(4)}"
    spec = SandboxSpec(writable=(tmp_path,), limits=Limits(processes=limit))
    attempts = 1000 if bounded else 200  # unbounded: be gentle with the machine
    proc = spawn(tier, [tag, f"fork={attempts}", "sleep=60"], spec, **kwargs)
    try:
        assert proc.stdout is not None
        forked = json.loads(proc.stdout.readline())["forked"]
        assert (0 < forked <= bound) if bounded else (forked == attempts)
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


def test_group_kill_ends_everything(tier: str, tmp_path: Path, reaper: None) -> None:
    """The caller's killpg reaches every process, even one that called setsid (bwrap: the PID
    namespace dies with bwrap; landlock: setsid fails). Only the rlimits tier lets it escape."""
    tag = f"tag=talaria-group-{secrets.token_hex(4)}"
    proc = spawn(tier, [tag, "fork=5", "escape=60", "sleep=60"], SandboxSpec(writable=(tmp_path,)))
    assert proc.stdout is not None
    assert json.loads(proc.stdout.readline())["forked"] == 5
    proc.stdout.readline()
    assert len(live(tag)) >= 7
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=5)
    survivors = wait_gone(tag, timeout=PATIENCE_S if tier in CONFINED else 1)
    if tier in CONFINED:
        assert survivors == []
    else:
        assert len(survivors) == 1 and os.getsid(survivors[0]) == survivors[0]
        os.kill(survivors[0], signal.SIGKILL)


INTERMEDIATE = """
import subprocess, sys
from pathlib import Path
from talaria.tools.sandbox.tiers import SandboxSpec, prepare
tier, probe, workdir, *checks = sys.argv[1:]
p = prepare([sys.executable, "-I", "-S", probe, *checks], SandboxSpec(writable=(Path(workdir),)),
            tier=tier)
child = subprocess.Popen(p.argv, start_new_session=True, stdout=subprocess.PIPE)
print(child.stdout.readline().decode(), end="", flush=True)
child.wait()
"""


def test_parent_death_kills_the_sandbox(tier: str, tmp_path: Path, reaper: None) -> None:
    """kill -9 the process that spawned the sandbox: nothing inside survives it."""
    tag = f"tag=talaria-orphan-{secrets.token_hex(4)}"
    parent = subprocess.Popen(
        [sys.executable, "-c", INTERMEDIATE, tier, str(PROBE), str(tmp_path), tag, "fork=3",
         "sleep=60"], cwd=REPO, stdout=subprocess.PIPE)
    assert parent.stdout is not None
    assert json.loads(parent.stdout.readline())["forked"] == 3
    assert len(live(tag)) >= 4
    parent.kill()
    parent.wait(timeout=5)
    assert wait_gone(tag) == []
    sandbox._prune_stale_tmp()  # the landlock tier's TMPDIR of the killed parent


def test_writable_and_hidden_nest(tier: str, outside: Path) -> None:
    """A staging dir inside hidden $TALARIA_HOME stays writable; ~/.ssh inside a writable HOME
    stays hidden on both confining tiers. Landlock pays for it: HOME itself takes no new
    entries (its existing ones stay writable), and a warning says so."""
    home = outside / "home"
    staging = home / ".talaria" / "cache" / "exec" / "k1"
    staging.mkdir(parents=True)
    checks = [f"write={staging / 'out.txt'}", f"read={home / '.talaria' / 'credentials'}"]
    r = run(tier, checks, SandboxSpec(writable=(staging,)))
    assert r[checks[0]]["ok"]
    assert r[checks[1]]["ok"] is (tier not in CONFINED)

    (home / "sub").mkdir()
    secret = f"read={home / '.ssh' / 'id_test'}"
    existing, new, deeper = (f"write={home / 'notes.txt'}", f"write={home / 'y'}",
                             f"write={home / 'sub' / 'z'}")
    r = run(tier, [secret, existing, new, deeper], SandboxSpec(writable=(home,)))
    assert r[secret]["ok"] is (tier not in CONFINED)
    assert r[existing]["ok"] and r[deeper]["ok"]
    assert r[new]["ok"] is (tier != "landlock")
    warnings = prepare(["true"], SandboxSpec(writable=(home,)), tier=tier).warnings
    assert any("Landlock protects" in w for w in warnings) is (tier == "landlock")


def test_signals_reach_the_command_and_defaults_are_restored(tier: str, tmp_path: Path) -> None:
    """SIGTERM to the spawned pid ends the command; SIGPIPE/SIGXFSZ are not left ignored
    (Python ignores them; an inherited SIG_IGN would change how `yes | head` ends)."""
    prepared = prepare(["sh", "-c", "grep SigIgn /proc/self/status; exec sleep 60"],
                       SandboxSpec(writable=(tmp_path,)), tier=tier)
    proc = subprocess.Popen(prepared.argv, start_new_session=True, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    ignored = int(proc.stdout.readline().split()[1], 16)
    assert ignored & (1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGXFSZ - 1)) == 0
    proc.terminate()
    assert proc.wait(timeout=5) in (-signal.SIGTERM, 128 + signal.SIGTERM)


def test_launcher_fails_closed() -> None:
    done = subprocess.run([sys.executable, "-I", "-S", str(sandbox.LAUNCHER), "{}", "--", "true"],
                          capture_output=True)
    assert done.returncode == 125 and b"talaria-sandbox:" in done.stderr


def test_prepare_rejects_bad_input(tmp_path: Path) -> None:
    spec = SandboxSpec(writable=(tmp_path,))
    for bad in ({"tier": "docker"}, {"pass_fds": (1,)}):
        with pytest.raises(sandbox.SandboxError):
            prepare(["true"], spec, **bad)
    with pytest.raises(sandbox.SandboxError):
        prepare(["true"], SandboxSpec(writable=(tmp_path / "missing",)), tier="rlimits")
    with pytest.raises(sandbox.SandboxError):
        prepare([], spec, tier="rlimits")


def test_detect_tier_is_cached() -> None:
    first = sandbox.detect_tier(refresh=True)
    assert first == TIERS[0]
    assert sandbox.detect_tier() == first


def test_landlock_private_tmp_is_removed(tmp_path: Path) -> None:
    if "landlock" not in TIERS:
        pytest.skip("no Landlock here")
    prepared = prepare(["true"], SandboxSpec(writable=(tmp_path,)), tier="landlock")
    tmpdir = json.loads(prepared.argv[prepared.argv.index(sandbox.BOOT) + 1])["tmpdir"]
    assert Path(tmpdir).is_dir()
    prepared.cleanup()
    assert not Path(tmpdir).exists()


def test_launcher_inside_a_hidden_dir_still_starts(tier: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Talaria itself under $TALARIA_HOME (a venv there): bound back read-only, not hidden."""
    monkeypatch.setenv("TALARIA_HOME", str(sandbox.PACKAGE_ROOT))
    r = run(tier, [f"read={sandbox.LAUNCHER}"], SandboxSpec(writable=(tmp_path,)))
    assert r[f"read={sandbox.LAUNCHER}"]["ok"]


def test_warnings_name_what_a_tier_does_not_bound(tier: str, tmp_path: Path) -> None:
    warnings = " ".join(prepare(["true"], SandboxSpec(writable=(tmp_path,)), tier=tier).warnings)
    assert ("resource limits only" in warnings) is (tier == "rlimits")
    unbounded = ROOT and ((tier == "landlock" and not PIDS_CGROUP) or (
        tier == "bubblewrap" and sandbox._kernel() < sandbox.PER_NS_PID_MAX))
    assert ("process count is not limited" in warnings) is unbounded


def test_the_launcher_runs_from_current_bytecode(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """`prepare` refreshes launch.py's cached bytecode (a sandbox cannot write it), and the
    launcher still runs when the cache is stale or missing (it compiles the source then)."""
    import importlib.util

    cached = Path(importlib.util.cache_from_source(str(sandbox.LAUNCHER)))
    monkeypatch.setattr(bytecode, "_compiled", set())
    cached.unlink(missing_ok=True)
    run(TIERS[0], ["tag=first"], SandboxSpec(writable=(tmp_path,)))
    assert cached.read_bytes()[:4] == importlib.util.MAGIC_NUMBER
    cached.write_bytes(b"stale")  # written meanwhile by something else: ignored, not trusted
    r = run(TIERS[0], [f"write={tmp_path / 'x'}"], SandboxSpec(writable=(tmp_path,)))
    assert r[f"write={tmp_path / 'x'}"]["ok"]
    bytecode._compiled.clear()
    bytecode.precompile(sandbox.LAUNCHER)
    assert cached.read_bytes()[:4] == importlib.util.MAGIC_NUMBER


@pytest.mark.parametrize("boot", ["early", "script"])
def test_a_root_sandbox_runs_in_its_pids_cgroup(boot: str, tmp_path: Path) -> None:
    """Joined while the launcher imports (`early`), or after it parsed its config (run as a
    script): either way before the command starts."""
    if not PIDS_CGROUP:
        pytest.skip("needs root and a writable pids cgroup")
    prepared = prepare([sys.executable, "-I", "-S", str(PROBE), "read=/proc/self/cgroup"],
                       SandboxSpec(writable=(tmp_path,)), tier="rlimits")
    argv = prepared.argv
    group = json.loads(argv[argv.index(sandbox.BOOT) + 1])["cgroup"]
    if boot == "script":
        at = argv.index("-c")
        argv = [*argv[:at], str(sandbox.LAUNCHER), *argv[at + 2:]]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=PATIENCE_S,
                              start_new_session=True)
        text = json.loads(done.stdout.splitlines()[0])["text"]
        assert group.endswith(next(line.split(":", 2)[2] for line in text.splitlines()
                                   if ":pids:" in line or line.startswith("0::")))
    finally:
        prepared.cleanup()
