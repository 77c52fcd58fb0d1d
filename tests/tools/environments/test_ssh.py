"""The ssh environment against a real sshd on loopback: the project copied there and edits
brought back (rsync and tar), a dropped connection mid-command, a changed host key, an
unreachable host."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from benchmarks.env_sshd import Sshd, free_port
from talaria.tools.environments.base import acting_where
from talaria.tools.errors import EnvError
from tests.tools.environments.conftest import make_workspace
from tests.tools.environments.test_env_tools import call

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("sync", ["rsync", "tar"])
async def test_project_goes_there_and_edits_come_back(request: pytest.FixtureRequest,
                                                      project: Path, sync: str) -> None:
    (project / "node_modules").mkdir()
    (project / "node_modules" / "big.js").write_text("x")
    ws = make_workspace("ssh", request, project, sync=sync)
    try:
        listing = await call(ws, "terminal", command="ls -A; pwd -P")
        names = listing["output"].split()
        assert "seed.txt" in names and "node_modules" not in names  # skipped: this platform's
        remote = project.parent / "remote"
        assert (remote / "seed.txt").exists()  # loopback: the "remote" disk is this one
        assert listing["output"].strip().endswith(str(project))  # shown as the project's path
        await call(ws, "write_file", path="new.txt", content="made there\n")
        await call(ws, "terminal", command="echo edited >> seed.txt")
        assert not (project / "new.txt").exists()  # still only there ...
        where = acting_where(ws, "read")  # the cards of every tool say where they act
        assert where and where.startswith("ssh 127.0.0.1:") and str(remote) in where
    finally:
        ws.close()
    assert (project / "new.txt").read_text() == "made there\n"  # ... until the session closes
    assert (project / "seed.txt").read_text().endswith("edited\n")


async def test_a_dropped_connection_mid_command_is_an_error_not_a_hang(
        request: pytest.FixtureRequest, project: Path, sshd: Sshd) -> None:
    ws = make_workspace("ssh", request, project)
    try:
        await call(ws, "terminal", command="true")
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                result: dict[str, object] = {}

                async def long() -> None:
                    result.update(await call(ws, "terminal", command="sleep 300"))

                tg.start_soon(long)
                await anyio.sleep(1.0)
                sshd.drop_connections()
        assert "connection to ssh 127.0.0.1 was lost" in str(result["error"])
        again = await call(ws, "terminal", command="echo back")  # reconnects on the next call
        assert again["output"].strip() == "back"
    finally:
        ws.close()


async def test_track_cwd_false_starts_every_command_afresh(request: pytest.FixtureRequest,
                                                          project: Path) -> None:
    ws = make_workspace("ssh", request, project, track_cwd=False)
    try:
        await call(ws, "terminal", command="mkdir -p a && cd a && export X=1")
        here = await call(ws, "terminal", command='pwd; echo "${X-none}"')
        assert here["output"] == f"{project}\nnone\n"
    finally:
        ws.close()


async def test_a_changed_host_key_is_refused(request: pytest.FixtureRequest, project: Path) -> None:
    ws = make_workspace("ssh", request, project, wrong_key=True)
    with pytest.raises(EnvError, match="Host key verification failed|REMOTE HOST IDENTIFICATION"):
        await ws.active()
    ws.close()


async def test_an_unreachable_host_is_one_line(request: pytest.FixtureRequest, project: Path,
                                               sshd: Sshd) -> None:
    ws = make_workspace("ssh", request, project, port=free_port())
    failed = await call(ws, "terminal", command="true")
    assert "Connection refused" in failed["error"] and "\n" not in failed["error"]
    ws.close()


async def test_cd_carries_over_to_the_next_command(request: pytest.FixtureRequest, project: Path) -> None:
    ws = make_workspace("ssh", request, project)
    try:
        moved = await call(ws, "terminal", command="mkdir -p a/b && cd a/b")
        assert moved["cwd"] == str(project / "a" / "b")  # said in the result, as a local path
        here = await call(ws, "terminal", command="pwd")
        assert here["output"].strip() == str(project / "a" / "b")
        other = await call(ws, "terminal", command="pwd", workdir="a")  # an explicit one wins
        assert other["output"].strip() == str(project / "a")
        await call(ws, "terminal", command="cd .. && rm -rf b")  # ends in a, removes b
        await call(ws, "terminal", command="cd b 2>/dev/null; rm -rf ../a")  # a is gone now
        back = await call(ws, "terminal", command="pwd")
        assert back["output"].strip() == str(project)  # the tracked dir vanished: the project
    finally:
        ws.close()
