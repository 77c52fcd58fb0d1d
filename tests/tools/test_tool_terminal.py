"""terminal through the registry, with real subprocesses."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from talaria.agent.tool_runner import invoke
from talaria.tools import terminal
from talaria.tools.builtin import load_builtin_tools
from talaria.tools.context import ToolContext
from talaria.tools.local.workspace import LocalWorkspace
from talaria.tools.sandbox.tiers import SandboxSpec
from talaria.tools.workspace import CommandResult

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def call(ws: LocalWorkspace, **args: Any) -> dict[str, Any]:
    spec = load_builtin_tools().get("terminal")
    assert spec is not None
    return await invoke(spec, args, ToolContext(workspace=ws))


class EditorLike(LocalWorkspace):
    """Runs locally but reports a terminal id, as the editor workspace does; records calls."""

    calls: list[dict[str, Any]]

    async def run(
        self,
        command: str,
        *,
        cwd: Path,
        timeout: float,
        output_limit: int,
        on_terminal: Callable[[str], Awaitable[None]] | None = None,
        sandbox: SandboxSpec | None = None,
        shell: str | None = None,
    ) -> CommandResult:
        self.calls = [
            *getattr(self, "calls", []),
            {"cwd": cwd, "timeout": timeout, "output_limit": output_limit, "sandbox": sandbox},
        ]
        if on_terminal is not None:
            await on_terminal("term-7")
        return await super().run(command, cwd=cwd, timeout=timeout, output_limit=output_limit,
                                 sandbox=sandbox, shell=shell)


async def test_exit_codes_are_results_not_errors(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    ok = await call(ws, command="echo hi")
    assert ok == {"exit_code": 0, "output": "hi\n", "omitted_bytes": 0, "timed_out": False}
    failed = await call(ws, command="echo oops >&2; exit 2")
    assert (failed["exit_code"], failed["output"], "error" in failed) == (2, "oops\n", False)


async def test_output_capped_at_limit(tmp_path: Path) -> None:
    r = await call(LocalWorkspace(tmp_path), command="head -c 100000 /dev/zero | tr '\\0' a")
    assert r["omitted_bytes"] == 100_000 - terminal.OUTPUT_LIMIT
    assert f"[{100_000 - terminal.OUTPUT_LIMIT:,} bytes omitted]" in r["output"]


async def test_timeout_is_flagged(tmp_path: Path) -> None:
    r = await call(LocalWorkspace(tmp_path), command="echo start; sleep 30", timeout=1)
    assert r["timed_out"] is True and r["exit_code"] is None
    assert r["output"] == "start\n" and "timed out after 1 s" in r["error"]


async def test_workdir_timeout_clamp_and_terminal_id(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    ws = EditorLike(tmp_path)
    reports: list[dict[str, Any]] = []

    async def report(update: dict[str, Any]) -> None:
        reports.append(update)

    spec = load_builtin_tools().get("terminal")
    assert spec is not None
    r = await invoke(spec,
        {"command": "pwd", "workdir": "sub", "timeout": 99_999},
        ToolContext(workspace=ws, report=report),
    )
    assert r["output"] == f"{tmp_path / 'sub'}\n" and r["_terminal_id"] == "term-7"
    assert reports == [{"terminal_id": "term-7"}]
    assert ws.calls == [
        {
            "cwd": tmp_path / "sub",
            "timeout": terminal.MAX_TIMEOUT,
            "output_limit": terminal.OUTPUT_LIMIT,
            "sandbox": None,
        }
    ]


async def test_bad_input(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    assert "error" in await call(ws, command="  ")
    assert (await call(ws, command="pwd", workdir="missing"))["error"] == (
        "Working directory not found: missing"
    )
    assert "error" in await call(ws, command="pwd", timeout="soon")
