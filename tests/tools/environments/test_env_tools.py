"""The tools' contract on every environment: one suite, run on local, a real container and a
real SSH host (the `workspace` fixture). Files are planted before the session (`seed.txt`) or
made through the tools, as a model would."""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any

import anyio
import pytest

from talaria.agent.tool_runner import invoke
from talaria.tools.builtin import load_builtin_tools
from talaria.tools.context import ToolContext
from talaria.tools.environments.base import EnvWorkspace
from talaria.tools.state import ToolState

pytestmark = pytest.mark.anyio


SESSIONS: weakref.WeakKeyDictionary[EnvWorkspace, ToolState] = weakref.WeakKeyDictionary()
"""The tool state of each workspace's session (the shell's directory lives there)."""


async def call(ws: EnvWorkspace, tool: str, **args: Any) -> dict[str, Any]:
    spec = load_builtin_tools().get(tool)
    assert spec is not None
    state = SESSIONS.setdefault(ws, ToolState())
    return await invoke(spec, args, ToolContext(workspace=ws, state=state))


async def test_a_planted_file_is_there(workspace: EnvWorkspace, project: Path) -> None:
    read = await call(workspace, "read_file", path="seed.txt")
    assert "planted before the session" in read["content"]
    ran = await call(workspace, "terminal", command="cat seed.txt")
    assert ran["exit_code"] == 0 and "planted" in ran["output"]


async def test_write_read_patch_round_trip(workspace: EnvWorkspace) -> None:
    text = "def greet(name):\n    return f'héllo {name}'\n"
    assert "error" not in await call(workspace, "write_file", path="pkg/greet.py", content=text)
    read = await call(workspace, "read_file", path="pkg/greet.py")
    assert "héllo" in read["content"]
    patched = await call(workspace, "patch", path="pkg/greet.py", old_string="héllo",
                         new_string="hello")
    assert "error" not in patched, patched
    ran = await call(workspace, "terminal", command="cat pkg/greet.py")
    assert "return f'hello {name}'" in ran["output"]


async def test_what_a_command_writes_the_file_tools_read(workspace: EnvWorkspace) -> None:
    ran = await call(workspace, "terminal", command="mkdir -p out && echo made > out/x.txt")
    assert ran["exit_code"] == 0
    read = await call(workspace, "read_file", path="out/x.txt")
    assert "made" in read["content"]


async def test_missing_and_binary_files_are_errors(workspace: EnvWorkspace) -> None:
    missing = await call(workspace, "read_file", path="nope.txt")
    assert "error" in missing and "nope.txt" in missing["error"]
    await call(workspace, "terminal", command="printf 'a\\000b' > blob.bin")
    binary = await call(workspace, "read_file", path="blob.bin")
    assert "binary" in binary["error"]


async def test_search_content_and_names(workspace: EnvWorkspace) -> None:
    await call(workspace, "write_file", path="src/a.py", content="import os\nTOKEN = 1\n")
    await call(workspace, "write_file", path="src/b.txt", content="nothing\n")
    await call(workspace, "write_file", path="node_modules/c.py", content="TOKEN = 2\n")
    found = await call(workspace, "search_files", pattern="TOKEN")
    assert [(m["path"], m["line"]) for m in found["matches"]] == [("src/a.py", 2)], found
    names = await call(workspace, "search_files", pattern="*.py", target="files")
    assert names["matches"] == ["src/a.py"]
    bad = await call(workspace, "search_files", pattern="(")
    assert "invalid regex" in bad["error"]


async def test_terminal_exit_code_workdir_and_output_cap(workspace: EnvWorkspace) -> None:
    failed = await call(workspace, "terminal", command="echo oops >&2; exit 3")
    assert failed["exit_code"] == 3 and "oops" in failed["output"]
    await call(workspace, "terminal", command="mkdir -p sub")
    where = await call(workspace, "terminal", command="pwd", workdir="sub")
    assert where["output"].strip().endswith("project/sub")
    gone = await call(workspace, "terminal", command="true", workdir="no/such/dir")
    assert "not found" in gone["error"]
    big = await call(workspace, "terminal", command="yes 0123456789 | head -c 200000")
    assert big["omitted_bytes"] > 0 and big["output"].startswith("0123456789")


async def test_timeout_kills_the_command_and_its_children(workspace: EnvWorkspace) -> None:
    ran = await call(workspace, "terminal", command="sleep 300 & echo $! > bg.pid; sleep 300",
                     timeout=1)
    assert ran["timed_out"] and ran["exit_code"] is None
    assert await state(workspace, "$(cat bg.pid)") == "gone"


async def state(ws: EnvWorkspace, pid: str) -> str:
    """`alive` or `gone` (a zombie is gone: some container inits never reap orphans)."""
    check = await call(ws, "terminal", command=(
        f"s=$(cut -d' ' -f3 /proc/{pid}/stat 2>/dev/null); "
        "if [ -z \"$s\" ] || [ \"$s\" = Z ]; then echo gone; else echo alive; fi"))
    return str(check["output"].strip())


async def test_a_cancelled_command_is_killed_there(workspace: EnvWorkspace) -> None:
    await call(workspace, "terminal", command="true")  # started
    with anyio.move_on_after(1.5):
        await call(workspace, "terminal",
                   command="echo $$ > shell.pid; sleep 300 & echo $! > child.pid; wait")
    assert await state(workspace, "$(cat shell.pid)") == "gone"
    assert await state(workspace, "$(cat child.pid)") == "gone"


async def test_a_command_cancelled_while_it_forks_leaves_nothing_of_its_group(
    workspace: EnvWorkspace,
) -> None:
    """Cancelled while it starts children all the time, so likely in the middle of a fork (a
    child bash was forking as the group's SIGTERM came could miss it, `talaria.tools.stopping`):
    no process of its group is left there."""
    await call(workspace, "terminal", command="true")  # started
    with anyio.move_on_after(1.5):
        await call(workspace, "terminal",
                   command="echo $$ > group.pid; while :; do sleep 300 & sleep 0.02; done")
    # Each process's state and group, read after its name (which may hold spaces); not zombies.
    left = await call(workspace, "terminal", command=(
        "g=$(cat group.pid); sed 's/.*) //' /proc/[0-9]*/stat 2>/dev/null | cut -d' ' -f1,3 "
        "| grep -c \"^[^Z] $g$\""))
    assert left["output"].strip() == "0", left
