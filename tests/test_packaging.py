"""The package as users get it (issues 11 and 15).

- pyproject's `packages` names every package folder (setuptools installs only those).
- slow: the wheel, built from this checkout, holds every data file and no test code; its
  metadata is `talaria-agent` at VERSION with no test-only dependency outside the `test` extra;
  installed in a fresh venv next to packages named `agent` and `tools` (Hermes Agent's names,
  a project's `tools`), `talaria demo` passes, `talaria-agent acp` (the registry's command)
  answers `initialize` with `authMethods`, and `talaria lsp` answers `initialize`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from talaria.acp_server.version import VERSION
from tests import ROOT
from tests.acp_harness import server_env

CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
FOLDERS = {"acp_server": "talaria.acp_server", "agent": "talaria.agent", "tools": "talaria.tools"}
RUNTIME = {"anyio", "openai", "anthropic", "tiktoken", "pygls", "lsprotocol"}
SHADOW = "raise ImportError('the other {0!r} package was imported instead of talaria.{0}')\n"


def test_the_packages_list_names_every_package_folder() -> None:
    listed = set(CONFIG["tool"]["setuptools"]["packages"])
    found = set()
    for folder, package in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            if "data" not in init.relative_to(ROOT / folder).parts:
                parts = init.parent.relative_to(ROOT / folder).parts
                found.add(".".join((package, *parts)))
    assert found == listed


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)],
                   check=True, capture_output=True, timeout=600)
    [built] = out.glob("*.whl")
    return built


@pytest.mark.slow
def test_the_wheel_has_the_data_files_and_no_tests(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(f"talaria_agent-{VERSION}.dist-info/METADATA").decode()
        scripts = archive.read(f"talaria_agent-{VERSION}.dist-info/entry_points.txt").decode()
    data = ROOT / "agent" / "data"
    for path in data.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            assert f"talaria/agent/data/{path.relative_to(data).as_posix()}" in names, path
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "editors/"))]
    assert not [n for n in names if not n.startswith(("talaria/", "talaria_agent-"))]
    assert "Name: talaria-agent\n" in metadata and f"Version: {VERSION}\n" in metadata
    required = {line.split(": ", 1)[1] for line in metadata.splitlines()
                if line.startswith("Requires-Dist: ") and "extra ==" not in line}
    assert {r.split(">")[0].split("<")[0].split("=")[0] for r in required} == RUNTIME
    assert "talaria = talaria.acp_server.cli.main:main" in scripts
    assert "talaria-agent = talaria.acp_server.cli.main:main" in scripts


@pytest.mark.slow
def test_the_wheel_installs_next_to_other_agent_and_tools_packages(
        wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
           "--disable-pip-version-check", str(wheel)]
    installed = subprocess.run(pip, capture_output=True, text=True, timeout=900, check=False)
    assert installed.returncode == 0, installed.stderr[-3000:]
    [site] = (venv / "lib").glob("python3*/site-packages")
    project = tmp_path / "project"
    for name in ("agent", "tools"):  # installed packages, and a project's own folders
        for where in (site, project):
            (where / name).mkdir(parents=True, exist_ok=True)
            (where / name / "__init__.py").write_text(SHADOW.format(name))
    env = server_env(tmp_path / "home", None, credentials=False)
    env.pop("PYTHONPATH")  # the wheel alone, not this checkout
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"

    demo = subprocess.run([str(venv / "bin" / "talaria"), "demo"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    assert "tests: pass" in demo.stdout

    acp = subprocess.run([str(venv / "bin" / "talaria-agent"), "acp"], cwd=project, env=env,
                         input=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                           "params": {"protocolVersion": 1,
                                                      "clientCapabilities": {}}}) + "\n",
                         capture_output=True, text=True, timeout=120, check=False)
    reply = json.loads(acp.stdout.splitlines()[0])
    assert reply["result"]["authMethods"] and reply["result"]["agentInfo"]["version"] == VERSION

    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"processId": None, "rootUri": None, "capabilities": {}}})
    lsp = subprocess.run([str(venv / "bin" / "talaria"), "lsp"], cwd=project, env=env,
                         input=f"Content-Length: {len(body)}\r\n\r\n{body}", capture_output=True,
                         text=True, timeout=120, check=False)
    assert '"name": "talaria"' in lsp.stdout and "executeCommandProvider" in lsp.stdout, lsp.stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("uvx") is None, reason="uv not installed")
def test_uvx_runs_the_checkout_as_the_registry_would(tmp_path: Path) -> None:
    """`uvx --from . talaria-agent acp`: the registry's form, from a checkout."""
    env = server_env(tmp_path / "home", None, credentials=False)
    env.pop("PYTHONPATH")
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": 1, "clientCapabilities": {}}}
    done = subprocess.run(["uvx", "--from", str(ROOT), "talaria-agent", "acp"], cwd=tmp_path,
                          env=env, input=json.dumps(request) + "\n", capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.stdout, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[0])["result"]["authMethods"]
