"""`terminal` keeps the shell's directory and exports between calls, on every sandbox tier;
what a command does to its own shell (exit, kill -9, exec, a timeout) never breaks the next."""

from __future__ import annotations

from pathlib import Path

import pytest

from talaria.tools.local.workspace import LocalWorkspace
from talaria.tools.shell import MAX_STATE_BYTES, ShellState
from tests.tools.shell_helpers import TIERS, Tools, project

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("tier", TIERS)
async def test_cd_and_exports_persist(tmp_path: Path, tier: str | None) -> None:
    root = project(tmp_path)
    run = Tools(LocalWorkspace(root), tier)
    first = await run("terminal", command="cd sub && export GREETING='it'\"'\"'s a\nline' N=1")
    assert first["exit_code"] == 0, first
    assert first["cwd"] == str(root / "sub")
    second = await run("terminal", command='pwd; printf "%s|" "$GREETING" "$N"')
    assert second["output"] == f"{root / 'sub'}\nit's a\nline|1|"
    assert "cwd" not in second  # it did not move
    await run("terminal", command="unset N; export N2=x; cd deeper")
    third = await run("terminal", command='pwd; echo "${N-unset}" $N2; exit 3')
    assert third["exit_code"] == 3
    assert third["output"] == f"{root / 'sub' / 'deeper'}\nunset x\n"
    # An exit still saves: the next one starts where that one ended.
    assert (await run("terminal", command="pwd"))["output"].strip() == str(root / "sub" / "deeper")
    run.close()


async def test_workdir_is_for_one_command(tmp_path: Path) -> None:
    root = project(tmp_path)
    run = Tools(LocalWorkspace(root))
    await run("terminal", command="cd sub")
    elsewhere = await run("terminal", command="pwd; export FROM_THERE=1", workdir=str(root / "sub" / "deeper"))
    assert elsewhere["output"].strip() == str(root / "sub" / "deeper")
    after = await run("terminal", command="pwd; echo $FROM_THERE")
    assert after["output"] == f"{root / 'sub'}\n1\n"  # the shell stayed; its exports carried


@pytest.mark.parametrize("how", ["kill -9 $$", "exec sleep 0", "kill -9 $$ & wait"])
async def test_a_shell_that_dies_is_restarted_and_says_so(tmp_path: Path, how: str) -> None:
    root = project(tmp_path)
    run = Tools(LocalWorkspace(root))
    await run("terminal", command="cd sub; export KEPT=yes")
    died = await run("terminal", command=f"cd deeper; export LOST=1; {how}")
    assert "ended without saving its state" in died["shell"]
    assert str(root / "sub") in died["shell"]
    after = await run("terminal", command='pwd; echo "$KEPT ${LOST-none}"')
    assert after["output"] == f"{root / 'sub'}\nyes none\n"
    assert "shell" not in after


async def test_a_timed_out_command_keeps_what_it_did_before_the_kill(tmp_path: Path) -> None:
    """SIGTERM on timeout runs the shell's EXIT trap, as Ctrl-C in a terminal keeps a `cd`."""
    root = project(tmp_path)
    run = Tools(LocalWorkspace(root))
    slow = await run("terminal", command="cd sub; export X=1; sleep 30", timeout=1)
    assert slow["timed_out"] is True and "timed out" in slow["error"]
    after = await run("terminal", command="pwd; echo $X")
    assert after["output"] == f"{root / 'sub'}\n1\n"


async def test_leaving_the_project_brings_the_next_command_back(tmp_path: Path) -> None:
    root = project(tmp_path)
    run = Tools(LocalWorkspace(root))
    left = await run("terminal", command="cd /")
    assert "outside the project" in left["shell"]
    assert (await run("terminal", command="pwd"))["output"].strip() == str(root)


async def test_a_directory_removed_meanwhile_falls_back_to_the_project(tmp_path: Path) -> None:
    root = project(tmp_path)
    run = Tools(LocalWorkspace(root))
    await run("terminal", command="cd sub/deeper")
    (root / "sub" / "deeper").rmdir()
    assert (await run("terminal", command="pwd"))["output"].strip() == str(root)


async def test_syntax_errors_keep_their_own_line_numbers(tmp_path: Path) -> None:
    run = Tools(LocalWorkspace(project(tmp_path)))
    bad = await run("terminal", command="echo one\nif then")
    assert bad["exit_code"] == 2
    assert "line 2" in bad["output"] and "one" in bad["output"]
    assert (await run("terminal", command="echo fine"))["output"] == "fine\n"


async def test_shells_are_per_environment(tmp_path: Path) -> None:
    root = project(tmp_path)
    run = Tools(LocalWorkspace(root))
    await run("terminal", command="cd sub")
    run.ws.name = "elsewhere"  # type: ignore[attr-defined]  (an EnvWorkspace's label)
    assert (await run("terminal", command="pwd"))["output"].strip() == str(root)
    assert set(run.state.shells) == {"local", "elsewhere"}


def test_a_state_past_the_bound_is_not_taken(tmp_path: Path) -> None:
    shell = ShellState()
    start = f"{tmp_path}\0HOME=/root\0".encode()
    assert shell.absorb(f"{tmp_path}\0A=1\0".encode(), (tmp_path,), start=start) is None
    assert shell.exports == {"A": "1"} and shell.unset == {"HOME"}
    huge = f"{tmp_path}\0B=".encode() + b"x" * MAX_STATE_BYTES
    assert "ended without saving" in (shell.absorb(huge, (tmp_path,)) or "")
    assert shell.exports == {"A": "1"}  # the last good state stays
