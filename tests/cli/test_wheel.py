"""The built wheel installs one namespace, `talaria.*`: next to other packages named `tools`
and `agent` (Hermes Agent installs both) it neither shadows them nor is shadowed, and
`talaria demo` runs from the installed console script."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests import ROOT
from tests.acp.test_client import agent_env

pytestmark = pytest.mark.slow


def run(*cmd: str | Path, **kw: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300,
                            stdin=subprocess.DEVNULL, **kw)  # type: ignore[call-overload]
    assert result.returncode == 0, f"{cmd}: {result.stdout}\n{result.stderr}"
    return result  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # From a copy: setuptools reuses a checkout's stale build/ directory.
    source = out / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "__pycache__", ".*cache*", "node_modules"))
    # As `pip install .` does: the build backend comes from the package index.
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, source)
    [built] = out.glob("*.whl")
    return built


def test_the_wheel_holds_only_the_talaria_namespace(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert tops == {"talaria"}, tops
    assert "talaria/agent/loop.py" in names and "talaria/tools/registry.py" in names
    assert not any(n.startswith("talaria/tests/") for n in names)


def test_installed_next_to_packages_named_tools_and_agent(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    # The runtime dependencies come from this interpreter's site-packages (no network here).
    run(sys.executable, "-m", "venv", "--system-site-packages", venv)
    python = venv / "bin" / "python"
    run(python, "-m", "pip", "install", "-q", "--no-deps", wheel)
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").stdout.strip())
    for name in ("tools", "agent"):  # somebody else's packages, installed in the same place
        (site / name).mkdir()
        (site / name / "__init__.py").write_text(f"WHO = 'not talaria: {name}'\n")

    probe = run(python, "-c", "import tools, agent, talaria.tools.registry, talaria.agent.loop;"
                "print(tools.WHO, agent.WHO, sep='|')", cwd=tmp_path)
    assert probe.stdout.strip() == "not talaria: tools|not talaria: agent"

    home = tmp_path / "home"
    demo = run(venv / "bin" / "talaria", "demo", cwd=tmp_path,
               env={**agent_env(home, TMPDIR=str(tmp_path)), "PATH": f"{venv / 'bin'}:/usr/bin:/bin"})
    assert "tests: pass" in demo.stdout, demo.stdout + demo.stderr
    assert "Traceback" not in demo.stderr
