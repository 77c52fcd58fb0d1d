"""execute_code on every environment (the `workspace` fixture): the session kernel runs
where the commands run, with the same contract: tool calls travel back, state persists,
`reset`, the timeout kills it, secrets are scrubbed."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from talaria.agent.config import load_config
from talaria.agent.door import LocalDoor
from talaria.agent.runtime import Opening, new_session
from talaria.agent.session import Session
from talaria.agent.tool_runner import call_nested
from talaria.tools.environments.base import EnvWorkspace

pytestmark = pytest.mark.anyio


def session_on(ws: EnvWorkspace, project: Path) -> Session:
    from talaria.agent.providers.factory import create_retrying_provider

    env = {"TALARIA_HOME": str(project.parent / "home"), "OPENAI_API_KEY": "sk-test",
           "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}  # never called: no model turn here
    config = load_config({}, env=env)
    provider = create_retrying_provider("openai:fake", (), env=env)
    return new_session(config, Opening(project, mode="bypass"), door=LocalDoor(ws),
                       provider=provider, store=None)


async def execute(session: Session, code: str, **args: Any) -> dict[str, Any]:
    return await call_nested(session, "execute_code", {"code": code, **args})


async def test_the_kernel_runs_there_and_tools_travel_back(workspace: EnvWorkspace,
                                                           project: Path) -> None:
    session = session_on(workspace, project)
    try:
        first = await execute(session, (
            "import os, json\nfrom hermes_tools import read_file, terminal, write_file\n"
            "x = 41\n"
            "write_file('made.txt', 'by a script')\n"
            "print(json.dumps({'seed': read_file('seed.txt')['content'],"
            " 'cmd': terminal('cat made.txt')['output'], 'cwd': os.getcwd(),"
            " 'secrets': [k for k in os.environ if 'KEY' in k or 'TOKEN' in k]}))\n"))
        assert first["status"] == "success", first
        seen = json.loads(first["output"])
        assert "planted before the session" in seen["seed"]
        assert seen["cmd"].strip() == "by a script"
        assert seen["secrets"] == []
        if workspace.is_local:
            assert seen["cwd"] == str(project)
        else:
            assert workspace.where and first["sandbox"].startswith("environment")
        again = await execute(session, "print(x + 1)")
        assert again["output"].strip() == "42"  # one kernel per session: state persists
        fresh = await execute(session, "print('x' in globals())", reset=True)
        assert fresh["output"].strip() == "False"
    finally:
        session.close()


async def test_a_timeout_kills_the_kernel_there_and_the_next_call_gets_a_new_one(
        workspace: EnvWorkspace, project: Path) -> None:
    session = session_on(workspace, project)
    state = session.tool_state
    state.exec_settings = replace(state.exec_settings, timeout=2.0, kill_grace=0.5)
    try:
        with anyio.fail_after(60):
            spun = await execute(session, "import os\nopen('k.pid','w').write(str(os.getpid()))\n"
                                          "while True: pass")
        assert spun["status"] == "timeout", spun
        if not workspace.is_local:  # locally its pid is the sandbox's (tests/tools/execute_code)
            check = await call_nested(session, "terminal", {"command": (
                "s=$(cut -d' ' -f3 /proc/$(cat k.pid)/stat 2>/dev/null); "
                "if [ -z \"$s\" ] || [ \"$s\" = Z ]; then echo gone; else echo alive; fi")})
            assert check["output"].strip() == "gone"
        after = await execute(session, "print('alive again')")
        assert after["status"] == "success" and "new" in after.get("kernel", "")
    finally:
        session.close()


async def test_a_cancelled_script_dies_there(workspace: EnvWorkspace, project: Path) -> None:
    session = session_on(workspace, project)
    try:
        await execute(session, "print('warm')")
        with anyio.move_on_after(2.0):
            await execute(session, "import os\nopen('c.pid','w').write(str(os.getpid()))\n"
                                   "while True: pass")
        if not workspace.is_local:  # locally its pid is the sandbox's (tests/tools/execute_code)
            check = await call_nested(session, "terminal", {"command": (
                "s=$(cut -d' ' -f3 /proc/$(cat c.pid)/stat 2>/dev/null); "
                "if [ -z \"$s\" ] || [ \"$s\" = Z ]; then echo gone; else echo alive; fi")})
            assert check["output"].strip() == "gone"
        again = await execute(session, "print('next')")
        assert again["output"].strip() == "next"
    finally:
        session.close()


async def test_a_thread_printing_between_scripts_does_not_stall_the_environment(
        workspace: EnvWorkspace, project: Path) -> None:
    session = session_on(workspace, project)
    try:
        await execute(session, "import threading, sys\n"
                               "def spam():\n    while True: sys.stdout.write('x' * 65536)\n"
                               "threading.Thread(target=spam, daemon=True).start()\nprint('started')")
        await anyio.sleep(1.0)  # megabytes written meanwhile, read by nobody
        with anyio.fail_after(60):
            ran = await call_nested(session, "terminal", {"command": "echo still here"})
        assert ran["output"].strip() == "still here"
    finally:
        session.close()


@pytest.mark.parametrize("workspace", ["docker", "ssh"], indirect=True)
async def test_without_a_kernel_there_each_script_runs_standalone(
        workspace: EnvWorkspace, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from talaria.tools.environments import kernel as remote_kernel
    from talaria.tools.errors import KernelError

    async def cannot_start(*args: Any) -> Any:  # the fault: the session kernel never comes up
        raise KernelError("the kernel exited at start (injected)")

    monkeypatch.setattr(remote_kernel, "start", cannot_start)
    session = session_on(workspace, project)
    try:
        first = await execute(session, "import os\nx = 41\nprint(x + 1, os.path.exists('seed.txt'))")
        assert first["status"] == "success" and first["mode"] == "standalone", first
        assert first["output"].split() == ["42", "True"]  # it ran there, in the project
        assert "could not start" in first["note"] and "injected" in first["note"]
        again = await execute(session, "print(x)")  # nothing carries over
        assert again["status"] == "error" and "NameError" in again["output"], again
        tools = await execute(session, "from hermes_tools import read_file\nread_file('seed.txt')")
        assert tools["status"] == "error" and "unavailable" in tools["output"], tools
    finally:
        session.close()
