"""Singularity / Apptainer, tested at its CLI boundary, not a live engine (none here): a
stand-in `apptainer` on PATH records its arguments and runs the command part on this machine,
so the whole path (helper, tools) runs for real behind the documented `exec` command line."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from talaria.tools.environments.base import EnvWorkspace, open_environment
from talaria.tools.environments.mux import BOOT_ARGV
from talaria.tools.environments.spec import resolve
from talaria.tools.errors import EnvError
from talaria.tools.local.workspace import LocalWorkspace
from tests.tools.environments.test_env_tools import call

pytestmark = pytest.mark.anyio

STAND_IN = """#!/usr/bin/env python3
import json, os, sys
with open(os.environ["APPTAINER_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
args = sys.argv[2:]
valued = {"--bind", "--pwd", "--overlay", "--network"}
while args and args[0].startswith("-"):
    args = args[2:] if args[0] in valued else args[1:]
os.execvp(args[1], args[1:])  # args[0] is the image
"""


@pytest.fixture
def apptainer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "apptainer"
    tool.write_text(STAND_IN)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    log = tmp_path / "apptainer.log"
    monkeypatch.setenv("APPTAINER_LOG", str(log))
    (tmp_path / "image.sif").write_text("not really an image")
    return log


def workspace_for(project: Path, **table: object) -> EnvWorkspace:
    spec = resolve("singularity", {"singularity": {"image": str(project.parent / "image.sif"), **table}})
    return EnvWorkspace(LocalWorkspace(project), open_environment(
        spec, cwd=project, session_id="hpc", home=project.parent))


async def test_exec_command_line_and_the_tools_through_it(apptainer: Path, project: Path) -> None:
    ws = workspace_for(project)
    try:
        ran = await call(ws, "terminal", command="cat seed.txt")
        assert "planted" in ran["output"]
        assert "error" not in await call(ws, "write_file", path="out.txt", content="hpc\n")
        assert (project / "out.txt").read_text() == "hpc\n"  # bound: the files are the project's
    finally:
        ws.close()
    argv = json.loads(apptainer.read_text().splitlines()[0])
    image = str(project.parent / "image.sif")
    assert argv == ["exec", "--bind", f"{project}:{project}", "--pwd", str(project),
                    "--writable-tmpfs", image, *BOOT_ARGV]


async def test_overlay_and_no_network(apptainer: Path, project: Path) -> None:
    ws = workspace_for(project, overlay=str(project.parent / "overlay.img"), network=False)
    try:
        await call(ws, "terminal", command="true")
    finally:
        ws.close()
    argv = json.loads(apptainer.read_text().splitlines()[0])
    assert argv[5:10] == ["--overlay", str(project.parent / "overlay.img"), "--net", "--network", "none"]


async def test_missing_engine_and_image_are_one_line(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                     apptainer: Path) -> None:
    with pytest.raises(EnvError, match="needs an image"):
        resolve_env = resolve("singularity", {})
        open_environment(resolve_env, cwd=project, session_id="x", home=project)
    gone = workspace_for(project, image=str(project / "nope.sif"))
    with pytest.raises(EnvError, match="nope.sif not found"):
        await gone.active()
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(EnvError, match="apptainer or singularity is not on PATH"):
        await workspace_for(project).active()
