"""The README's second command, `./scripts/test` (issue 28).

- Its environment (`scripts/test-env`): `.venv-test/` in the checkout, whatever venv is active;
  the active one is left as it was, and a second run installs nothing.
- Under it, a skip for a tool it installs ("... not installed") is a failure, not a pass.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from tests import ROOT


def site_packages(venv: Path) -> Path:
    [site] = (venv / "lib").glob("python3*/site-packages")
    return site


@pytest.mark.slow
def test_the_test_environment_is_its_own_and_made_once(tmp_path: Path) -> None:
    user = tmp_path / "user-venv"  # the README's first command's venv, active
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(user)], check=True)
    before = sorted(p.name for p in site_packages(user).iterdir())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(VIRTUAL_ENV=str(user), PATH=f"{user / 'bin'}:{os.environ['PATH']}")
    runs = [subprocess.run([str(ROOT / "scripts" / "test-env")], env=env, capture_output=True,
                           text=True, timeout=1200, stdin=subprocess.DEVNULL, check=False)
            for _ in range(2)]
    for done in runs:
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == str(ROOT / ".venv-test")
    assert "installing" not in runs[1].stderr and "making" not in runs[1].stderr, runs[1].stderr
    assert sorted(p.name for p in site_packages(user).iterdir()) == before

    venv = ROOT / ".venv-test"
    found = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import talaria.agent, ruff, mypy, pytest; print(talaria.agent.__path__[0])"],
                           env=env, capture_output=True, text=True, timeout=120, check=False)
    assert found.stdout.strip() == str(ROOT / "agent"), found.stderr
    assert (venv / "bin" / "uvx").exists()  # tests/test_packaging.py
    if sys.platform == "linux" and platform.machine() == "x86_64":
        assert (venv / "bin" / "nvim").exists()  # tests/lsp/test_neovim.py


SKIPPING = """
import pytest

def test_needs_a_tool():
    pytest.skip("frobnicate not installed")
"""


@pytest.mark.parametrize("under_scripts_test", [True, False])
def test_a_skip_for_a_missing_tool_fails_under_scripts_test(tmp_path: Path,
                                                            under_scripts_test: bool) -> None:
    (tmp_path / "test_tool.py").write_text(SKIPPING, encoding="utf-8")
    env = {**os.environ, "TALARIA_TEST_NO_MISSING_TOOLS": "1" if under_scripts_test else ""}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p",
                           "tests.conftest", "-q", str(tmp_path / "test_tool.py")], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    if under_scripts_test:
        assert done.returncode == 1 and "1 failed" in done.stdout, done.stdout
        assert "missing tool that scripts/test installs: frobnicate not installed" in done.stdout
    else:
        assert done.returncode == 0 and "1 skipped" in done.stdout, done.stdout
