"""The package as users get it (issues 11 and 15); the built wheel itself is tested in
`tests/cli/test_wheel.py`.

- pyproject's `packages` names every package folder (setuptools installs only those).
- slow: `uvx --from CHECKOUT talaria-agent acp`, the ACP registry's form, answers `initialize`
  with `authMethods`.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests import ROOT
from tests.acp_harness import server_env

CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
FOLDERS = {"acp_server": "talaria.acp_server", "agent": "talaria.agent", "tools": "talaria.tools"}


def test_the_packages_list_names_every_package_folder() -> None:
    listed = set(CONFIG["tool"]["setuptools"]["packages"])
    found = set()
    for folder, package in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            if "data" not in init.relative_to(ROOT / folder).parts:
                parts = init.parent.relative_to(ROOT / folder).parts
                found.add(".".join((package, *parts)))
    assert found == listed


BESIDE = Path(sys.executable).with_name("uvx")
UVX = shutil.which("uvx") or (str(BESIDE) if BESIDE.exists() else None)
"""On PATH, else the one the test extras install (`uv`) beside this Python."""


@pytest.mark.slow
@pytest.mark.skipif(UVX is None, reason="uv not installed: pip install '.[test]' brings it")
def test_uvx_runs_the_checkout_as_the_registry_would(tmp_path: Path) -> None:
    """`uvx --from . talaria-agent acp`: the registry's form, from a checkout."""
    env = server_env(tmp_path / "home", None, credentials=False)
    env.pop("PYTHONPATH")
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": 1, "clientCapabilities": {}}}
    done = subprocess.run([str(UVX), "--from", str(ROOT), "talaria-agent", "acp"], cwd=tmp_path,
                          env=env, input=json.dumps(request) + "\n", capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.stdout, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[0])["result"]["authMethods"]


def test_install_hints_name_the_distribution_talaria_agent() -> None:
    """Issue 28: `pip install 'talaria[modal]'` installs an unrelated project: every hint in
    the code and the docs names `talaria-agent`."""
    wrong = re.compile(r"(pip|pipx|uv pip|uv tool) install\s+(?:-\S+\s+)*['\"]?talaria(?![\w-])")
    found = []
    for folder in ("acp_server", "agent", "tools", "docs", "editors"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".md", ".json", ".toml", ".lua", ".el") and "node_modules" not in path.parts:
                text = path.read_text(encoding="utf-8", errors="replace")
                found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in wrong.finditer(text)]
    for name in ("README.md", "AGENTS.md"):
        found += [f"{name}: {m.group(0)}" for m in wrong.finditer((ROOT / name).read_text(encoding="utf-8"))]
    assert not found, found
