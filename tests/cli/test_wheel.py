"""The built wheel installs one namespace, `talaria.*`: next to other packages named `tools`
and `agent` (Hermes Agent installs both) it neither shadows them nor is shadowed, and
`talaria demo` runs from the installed console script.

Issue 15: the wheel is the `talaria-agent` distribution at VERSION, holds every data file,
depends on nothing test-only outside the `test` extra, installs `talaria` and `talaria-agent`;
installed, `talaria-agent acp` (the ACP registry's command) answers `initialize` with
`authMethods` and `talaria lsp` answers `initialize`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from talaria.acp_server.version import VERSION
from tests import ROOT
from tests.acp.test_client import agent_env

pytestmark = pytest.mark.slow
RUNTIME = {"anyio", "openai", "anthropic", "tiktoken", "pygls", "lsprotocol", "pyyaml", "mcp",
           "trafilatura", "lxml_html_clean", "pypdf", "pillow", "atif"}


def run(*cmd: str | Path, **kw: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300,
                            stdin=subprocess.DEVNULL, **kw)  # type: ignore[call-overload]
    assert result.returncode == 0, f"{cmd}: {result.stdout}\n{result.stderr}"
    return result  # type: ignore[no-any-return]


def probe_venv(venv: Path) -> Path:
    """A fresh venv that sees the runtime dependencies this interpreter sees (no network).
    Not `--system-site-packages`: from inside a venv (scripts/test's own, or a user's) that
    reaches only the base interpreter's packages (issue 28: `No module named 'anyio'`). The
    site directories on this sys.path are appended as plain paths, so their .pth files (this
    checkout's editable install) are not run: the venv's `talaria` is the wheel's."""
    run(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").stdout.strip())
    outer = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()]
    (site / "outer-site-packages.pth").write_text("".join(f"{p}\n" for p in outer), encoding="utf-8")
    return python


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # From a copy: setuptools reuses a checkout's stale build/ directory.
    source = out / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv*", ".typecheck", "build", "*.egg-info", "__pycache__", ".*cache*", "node_modules"))
    # `python -m build`, as a release is made: the build backend comes from the package index.
    run(sys.executable, "-m", "build", "--wheel", "--outdir", out, source)
    [built] = out.glob("*.whl")
    return built


def test_the_wheel_holds_only_the_talaria_namespace(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert tops == {"talaria"}, tops
    assert "talaria/agent/loop.py" in names and "talaria/tools/registry.py" in names
    assert not any(n.startswith("talaria/tests/") for n in names)


def test_the_wheel_is_talaria_agent_with_its_data_and_runtime_dependencies(wheel: Path) -> None:
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    info = f"talaria_agent-{VERSION}.dist-info"
    metadata = archive.read(f"{info}/METADATA").decode()
    scripts = archive.read(f"{info}/entry_points.txt").decode()
    data = ROOT / "agent" / "data"
    for path in data.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            assert f"talaria/agent/data/{path.relative_to(data).as_posix()}" in names, path
    assert "Name: talaria-agent\n" in metadata and f"Version: {VERSION}\n" in metadata
    required = [line.split(": ", 1)[1] for line in metadata.splitlines()
                if line.startswith("Requires-Dist: ") and "extra ==" not in line]
    assert {r.split(">")[0].split("<")[0].split("=")[0] for r in required} == RUNTIME
    assert "talaria = talaria.acp_server.cli.main:main" in scripts
    assert "talaria-agent = talaria.acp_server.cli.main:main" in scripts


def test_installed_next_to_packages_named_tools_and_agent(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    python = probe_venv(venv)
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

    env = {**agent_env(home, TMPDIR=str(tmp_path)), "PATH": f"{venv / 'bin'}:/usr/bin:/bin"}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": 1, "clientCapabilities": {}}}
    acp = subprocess.run([str(venv / "bin" / "talaria-agent"), "acp"], cwd=tmp_path, env=env,
                         input=json.dumps(initialize) + "\n", capture_output=True, text=True,
                         timeout=120, check=False)
    reply = json.loads(acp.stdout.splitlines()[0])
    assert reply["result"]["authMethods"] and reply["result"]["agentInfo"]["version"] == VERSION

    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"processId": None, "rootUri": None, "capabilities": {}}})
    lsp = subprocess.run([str(venv / "bin" / "talaria"), "lsp"], cwd=tmp_path, env=env,
                         input=f"Content-Length: {len(body)}\r\n\r\n{body}",
                         capture_output=True, text=True, timeout=120, check=False)
    assert '"name": "talaria"' in lsp.stdout and "executeCommandProvider" in lsp.stdout, lsp.stderr
