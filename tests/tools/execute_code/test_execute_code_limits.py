"""What a script may use in all: temporary files (TMPDIR), processes; and that a kernel is
recorded so that it dies with the agent. On every sandbox tier this machine has."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from talaria.tools.procs import records_dir
from talaria.tools.sandbox import cgroup
from talaria.tools.sandbox.tiers import Limits, detect_tier, landlock_abi
from tests.exec_helpers import configure, execute, kernel_tag, wait_gone
from tests.helpers import make_session

TIERS = sorted({detect_tier(), "rlimits"} | ({"landlock"} if landlock_abi() >= 1 else set()))
ROOT = os.geteuid() == 0
MiB = 1024 * 1024
BOUND = 8 * MiB

# The example, scaled down: four files, each under the per-file limit, together twice
# the bound.
FILL = """
import os
written = 0
try:
    for n in range(4):
        with open(os.path.join(os.environ["TMPDIR"], f"big{{n}}"), "wb") as f:
            for _ in range(4):
                written += f.write(b"x" * 1024 * 1024)
except OSError as exc:
    print("stopped by", exc.strerror, "after", written)
    {reraise}
print("wrote", written)
"""


def mounts_a_tmpfs(tier: str) -> bool:
    """bwrap always sizes one; the other tiers mount only as root (else they measure)."""
    return tier == "bubblewrap" or ROOT


@pytest.mark.parametrize("tier", TIERS)
def test_temporary_files_are_bounded_and_the_result_says_so(fake_llm, tmp_path: Path,
                                                            tier: str) -> None:
    if not mounts_a_tmpfs(tier):
        pytest.skip("measured by the supervisor instead: tests/tools/sandbox")
    session = make_session(fake_llm, tmp_path)
    configure(session, tier=tier, tmp_bytes=BOUND)
    failed = execute(session, FILL.format(reraise="raise"))
    assert failed["status"] == "error" and "No space left on device" in failed["error"]
    assert "stopped by No space left on device after" in failed["output"]
    written = int(failed["output"].split()[-1])
    assert BOUND - MiB <= written <= BOUND
    assert "limited to 8 MiB" in failed["tmp_full"]
    # The script's own handling does not hide it; the kernel lives on.
    caught = execute(session, "import os\nfor n in range(4): os.remove(os.path.join("
                              "os.environ['TMPDIR'], f'big{n}')) if n < 2 else None\n"
                              + FILL.format(reraise="pass"))
    assert caught["status"] == "success" and "tmp_full" in caught
    cleared = execute(session, "import glob, os\n[os.remove(p) for p in glob.glob("
                               "os.environ['TMPDIR'] + '/*')]\nprint('ok')")
    assert cleared["status"] == "success" and "tmp_full" not in cleared
    assert "kernel" not in cleared, "the same kernel throughout"


@pytest.mark.parametrize("tier", TIERS)
def test_strict_mode_files_stay_in_the_sandbox(fake_llm, tmp_path: Path, tier: str) -> None:
    """Strict mode's working dir is the scratch dir: bounded too, and private."""
    if not mounts_a_tmpfs(tier):
        pytest.skip("no private tmpfs without root outside bwrap")
    session = make_session(fake_llm, tmp_path, exec_mode="strict")
    configure(session, tier=tier, tmp_bytes=BOUND)
    result = execute(session, "import os\nopen('here.txt', 'w').write('x')\n"
                              "print(os.getcwd() == os.environ['TMPDIR'])")
    assert result["output"] == "True\n"
    scratch = tmp_path / ".home" / "cache" / "exec" / kernel_tag(session)
    assert not (scratch / "here.txt").exists(), "the host sees only an empty mount point"
    big = execute(session, f"open('big', 'wb').write(b'x' * {2 * BOUND})")
    assert big["status"] == "error" and "tmp_full" in big


@pytest.mark.parametrize("tier", TIERS)
def test_a_fork_bomb_is_bounded(fake_llm, tmp_path: Path, tier: str) -> None:
    """Root included: a pids cgroup (or bwrap's pid_max) where RLIMIT_NPROC does not apply."""
    if ROOT and tier != "bubblewrap" and cgroup.base() is None:
        pytest.skip("root without a writable pids cgroup: unbounded, and the result warns")
    session = make_session(fake_llm, tmp_path)
    configure(session, tier=tier)
    code = ("import os, time\nkids = 0\ntry:\n    for _ in range(3000):\n"
            "        if os.fork() == 0:\n            time.sleep(30)\n            os._exit(0)\n"
            "        kids += 1\nexcept OSError as exc:\n    print(kids, exc.strerror)\n")
    result = execute(session, code)
    forked, _, error = result["output"].partition(" ")
    bound = 301 if ROOT and tier == "bubblewrap" else Limits().processes
    assert 0 < int(forked) <= bound and "Resource temporarily unavailable" in error
    tag = kernel_tag(session)
    session.close()
    assert wait_gone(tag), "the kernel and its children die with the session"


def test_a_kernel_is_recorded_while_it_runs(fake_llm, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TALARIA_HOME", str(tmp_path / ".home"))
    session = make_session(fake_llm, tmp_path)
    execute(session, "pass")
    records = [json.loads(p.read_text()) for p in records_dir().iterdir()]
    assert [r["kind"] for r in records] == ["execute_code"]
    session.close()
    assert list(records_dir().iterdir()) == []
