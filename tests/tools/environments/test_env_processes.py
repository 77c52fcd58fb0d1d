"""The shell's state and background processes on every environment (local, a real container,
a real SSH host): the same contract as on this machine, through the environment helper."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from talaria.tools.environments.base import EnvWorkspace
from tests.tools.environments.test_env_tools import SESSIONS, call

pytestmark = pytest.mark.anyio


async def test_cd_and_exports_persist_there(workspace: EnvWorkspace, project: Path) -> None:
    moved = await call(workspace, "terminal", command="mkdir -p w/x && cd w/x && export ENVVAR='a b'")
    assert moved["exit_code"] == 0 and moved["cwd"] == str(project / "w" / "x"), moved
    here = await call(workspace, "terminal", command='pwd; echo "$ENVVAR"')
    assert here["output"] == f"{project / 'w' / 'x'}\na b\n"  # busybox's sh in the image too


async def test_a_background_process_there(workspace: EnvWorkspace, project: Path) -> None:
    await call(workspace, "terminal", command="export GREETING=hello")
    started = await call(workspace, "terminal", background=True,
                         command='echo "$GREETING from $(pwd)"; read line; echo "read $line"; sleep 300')
    sid = started["session_id"]
    assert started["status"] == "running", started
    await call(workspace, "process", action="submit", session_id=sid, data="input")
    with anyio.fail_after(20):
        while "read input" not in (polled := await call(workspace, "process", action="log", session_id=sid))["output"]:
            await anyio.sleep(0.1)
    assert polled["output"] == f"hello from {project}\nread input"  # paths as the project's
    killed = await call(workspace, "process", action="kill", session_id=sid)
    assert killed["status"] == "killed"
    finished = await call(workspace, "terminal", command="sleep 300", background=True)
    state = SESSIONS[workspace]
    entry = state.processes.get(finished["session_id"])  # type: ignore[union-attr]
    state.close()  # the session closes: what still runs there is killed
    with anyio.fail_after(20):
        await entry.proc.ended.wait()
    assert entry.proc.killed
