"""The sandbox's lifecycle on every tier here: group kill, parent death, nesting of writable and
hidden dirs, signals, the launcher failing closed, detection, cleanup, warnings, bytecode,
pids cgroups."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from talaria.tools.sandbox import bytecode
from talaria.tools.sandbox import tiers as sandbox
from talaria.tools.sandbox.tiers import SandboxSpec, prepare
from tests import ROOT as REPO
from tests.exec_helpers import PATIENCE_S
from tests.tools.sandbox.conftest import (
    CONFINED,
    PIDS_CGROUP,
    PROBE,
    ROOT,
    TIERS,
    live,
    run,
    spawn,
    wait_gone,
)


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


@pytest.mark.parametrize("local", [True, False], ids=["agent", "editor"])
def test_a_sandbox_spawned_from_a_thread_that_ends(tier: str, local: bool, tmp_path: Path,
                                                   reaper: None) -> None:
    """The parent-death signal follows the thread that forked. The agent's own sandboxes die
    with it (it spawns on its event loop's thread); one an editor spawns (`local=False`: its
    terminal, from whatever thread) lives on once that thread ends, until the editor kills it."""
    started, done = tmp_path / "started", tmp_path / "done"
    p = prepare(["/bin/sh", "-c", f"echo > {started}; sleep 1; echo ok > {done}"],
                SandboxSpec(writable=(tmp_path,)), tier=tier, local=local)
    spawned: list[subprocess.Popen] = []

    def spawn_and_end() -> None:  # the thread ends once the command runs, confined
        spawned.append(subprocess.Popen(p.argv, start_new_session=True))
        deadline = time.monotonic() + PATIENCE_S
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.01)

    spawner = threading.Thread(target=spawn_and_end)
    spawner.start()
    spawner.join()
    code = spawned[0].wait(timeout=PATIENCE_S)
    p.cleanup()
    if local:
        assert code != 0 and not done.exists()
    else:
        assert code == 0 and done.read_text() == "ok\n"


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
