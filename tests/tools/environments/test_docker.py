"""The docker environment on a real engine (podman here, with a local image): what persists,
limits, no network, cancel and kill -9 leave nothing running, clear errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from talaria.tools.environments.docker import find_engine, reap_orphans
from talaria.tools.errors import EnvError
from tests import ROOT
from tests.tools.environments.conftest import make_workspace
from tests.tools.environments.test_env_tools import call, state

pytestmark = pytest.mark.anyio


def containers(name: str = "") -> list[str]:
    out = subprocess.run(["podman", "ps", "-a", "--filter", "label=talaria.environment",
                          "--format", "{{.Names}}"], capture_output=True, text=True).stdout
    return [n for n in out.split() if name in n]


async def test_a_container_per_session_removed_on_close(request: pytest.FixtureRequest,
                                                        project: Path) -> None:
    ws = make_workspace("docker", request, project, session_id="removed-on-close")
    ran = await call(ws, "terminal", command="cat /proc/1/cmdline | tr '\\0' ' '")
    assert "while" in ran["output"]  # our idle loop is the container's first process
    assert containers("removed-on-close")
    ws.close()
    assert not containers("removed-on-close")


async def test_persistent_keeps_container_files_and_cache_across_sessions(
        request: pytest.FixtureRequest, project: Path) -> None:
    first = make_workspace("docker", request, project, session_id="one", persistent=True)
    env = first.env
    try:
        try:
            made = await call(first, "terminal",
                              command="mkdir -p /opt && echo pkg > /opt/installed && echo hot > /root/.cache/c")
            assert made["exit_code"] == 0, made
        finally:
            first.close()
        assert containers(env.name)  # type: ignore[attr-defined]  # kept (stopped)
        second = make_workspace("docker", request, project, session_id="two", persistent=True)
        try:
            seen = await call(second, "terminal", command="cat /opt/installed /root/.cache/c")
            assert seen["output"].split() == ["pkg", "hot"]
        finally:
            second.close()
    finally:
        subprocess.run(["podman", "rm", "-f", env.name], capture_output=True)  # type: ignore[attr-defined]
        subprocess.run(["podman", "volume", "rm", "-f", env.volume], capture_output=True)  # type: ignore[attr-defined]


async def test_limits_memory_and_pids(request: pytest.FixtureRequest, project: Path) -> None:
    ws = make_workspace("docker", request, project, session_id="limits", memory="64m", pids=40)
    try:
        hog = await call(ws, "terminal", command="python3 -c \"b = bytearray(300 * 2**20); print('allocated')\"")
        assert hog["exit_code"] != 0 and "allocated" not in hog["output"]
        forks = await call(ws, "terminal",
                           command="for i in $(seq 1 80); do sleep 30 >/dev/null 2>&1 & done 2>&1 "
                           "| tail -1; echo done")
        assert "can't fork" in forks["output"] or "Resource temporarily unavailable" in forks["output"]
    finally:
        ws.close()


async def test_network_is_off_unless_configured(request: pytest.FixtureRequest, project: Path) -> None:
    probe = "ls /sys/class/net"
    off = make_workspace("docker", request, project, session_id="net-off")
    on = make_workspace("docker", request, project, session_id="net-on", network=True)
    try:
        assert (await call(off, "terminal", command=probe))["output"].split() == ["lo"]
        assert len((await call(on, "terminal", command=probe))["output"].split()) > 1
    finally:
        off.close()
        on.close()


async def test_cancel_kills_the_process_inside(request: pytest.FixtureRequest, project: Path) -> None:
    ws = make_workspace("docker", request, project, session_id="cancel")
    try:
        await call(ws, "terminal", command="true")
        with anyio.move_on_after(1.5):
            await call(ws, "terminal", command="echo $$ > shell.pid; sleep 300")
        assert await state(ws, "$(cat shell.pid)") == "gone"
        left = await call(ws, "terminal", command="ps -o args | grep -c '^sleep 300$' || true")
        assert left["output"].strip() == "0"
    finally:
        ws.close()


AGENT = textwrap.dedent("""
    import anyio, sys
    from pathlib import Path
    from talaria.tools.environments.base import EnvWorkspace, open_environment
    from talaria.tools.environments.spec import resolve
    from talaria.tools.local.workspace import LocalWorkspace

    async def main():
        cwd = Path(sys.argv[1])
        spec = resolve("docker:" + sys.argv[2], {})
        ws = EnvWorkspace(LocalWorkspace(cwd), open_environment(
            spec, cwd=cwd, session_id="killed-agent", home=cwd.parent))
        await ws.run("true", cwd=cwd, timeout=30, output_limit=100)
        print("up", flush=True)
        await anyio.sleep(300)

    anyio.run(main)
""")


def test_orphans_of_a_killed_agent_are_removed_on_the_next_start(image: str, project: Path) -> None:
    agent = subprocess.Popen([sys.executable, "-c", AGENT, str(project), image],
                             stdout=subprocess.PIPE, text=True, cwd=ROOT,
                             env={**os.environ, "TALARIA_HOME": str(project.parent / "home")})
    assert agent.stdout is not None and agent.stdout.readline().strip() == "up"
    assert containers("killed-agent")
    agent.send_signal(signal.SIGKILL)
    agent.wait()
    left = containers("killed-agent")  # nothing could clean up after kill -9 ...
    removed = reap_orphans(find_engine("podman"))  # ... until the next start does
    assert not containers("killed-agent")
    if "PYTEST_XDIST_WORKER" not in os.environ:  # else another worker's start may reap first
        assert left and any("killed-agent" in name for name in removed)


async def test_bad_input_is_one_clear_line(request: pytest.FixtureRequest, project: Path) -> None:
    ws = make_workspace("docker", request, project, session_id="bad-image")
    ws.env.settings["image"] = "localhost/no-such-image:1"  # type: ignore[attr-defined]
    failed = await call(ws, "terminal", command="true")
    assert "image 'localhost/no-such-image:1' not found" in failed["error"]
    assert "\n" not in failed["error"]
    ws.close()
    no_engine = make_workspace("docker", request, project, session_id="no-engine",
                               engine="no-such-engine")
    with pytest.raises(EnvError, match="no container engine found"):
        await no_engine.active()
    assert json.dumps(containers("bad-image")) == "[]"


async def test_an_image_without_python_runs_commands_by_exec(project: Path, image: str) -> None:
    from benchmarks import env_image
    from talaria.tools.environments.base import EnvWorkspace, open_environment
    from talaria.tools.environments.spec import resolve
    from talaria.tools.local.workspace import LocalWorkspace
    from tests.tools.environments.test_env_execute_code import call_nested, session_on

    bare = env_image.ensure_image(python=False)
    ws = EnvWorkspace(LocalWorkspace(project), open_environment(
        resolve(f"docker:{bare}", {}), cwd=project, session_id="no-python", home=project.parent))
    try:
        ran = await call(ws, "terminal", command="cat seed.txt; command -v python3 || echo none")
        assert ran["exit_code"] == 0 and ran["output"].split()[-1] == "none"
        assert "planted" in ran["output"]
        moved = await call(ws, "terminal", command="mkdir -p d && cd d && export V='a b'")
        assert moved["cwd"] == str(project / "d")  # the shell's state rides on the output
        here = await call(ws, "terminal", command='pwd; echo "$V"')
        assert here["output"] == f"{project / 'd'}\na b\n"
        await background_by_exec(ws, project)
        await call(ws, "terminal", command="cd ..")
        slow = await call(ws, "terminal", command="sleep 300 & echo $! > bg.pid; sleep 300", timeout=1)
        assert slow["timed_out"]
        assert await state(ws, "$(cat bg.pid)") == "gone"  # killed in the container, not only here
        session = session_on(ws, project)
        script = await call_nested(session, "execute_code", {"code": "print(1)"})
        assert "execute_code cannot run in container" in script["error"]  # never here instead
    finally:
        ws.close()
    assert not containers("no-python")


async def background_by_exec(ws: object, project: Path) -> None:
    """A background process where commands go by one exec each: started detached there,
    polled, killed by its group; one left running ends with the session."""
    from tests.tools.environments.test_env_tools import SESSIONS

    started = await call(ws, "terminal", background=True,  # type: ignore[arg-type]
                         command='echo "up in $(pwd) with $V"; sleep 300 & echo $! > kid; wait')
    sid = started["session_id"]
    with anyio.fail_after(30):
        while "up in" not in (log := await call(ws, "process", action="log", session_id=sid))["output"]:  # type: ignore[arg-type]
            await anyio.sleep(0.2)
    assert log["output"] == f"up in {project / 'd'} with a b"
    refused = await call(ws, "process", action="submit", session_id=sid, data="x")  # type: ignore[arg-type]
    assert "takes no input" in refused["error"]
    assert (await call(ws, "process", action="kill", session_id=sid))["status"] == "killed"  # type: ignore[arg-type]
    kid = (project / "d" / "kid").read_text().strip() if (project / "d" / "kid").exists() else ""
    left = await call(ws, "terminal", background=True, command="sleep 300")  # type: ignore[arg-type]
    entry = SESSIONS[ws].processes.get(left["session_id"])  # type: ignore[index, union-attr]
    SESSIONS[ws].close()  # type: ignore[index]
    with anyio.fail_after(30):
        await entry.proc.ended.wait()
    assert entry.proc.killed and kid
