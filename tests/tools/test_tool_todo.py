"""todo through the registry: state, merge, and the ACP plan it reports."""

from __future__ import annotations

from typing import Any

import pytest

from talaria.agent.tool_runner import invoke
from talaria.tools.builtin import load_builtin_tools
from talaria.tools.context import ToolContext
from talaria.tools.local.workspace import LocalWorkspace

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def reports() -> list[dict[str, Any]]:
    return []


@pytest.fixture
def ctx(tmp_path: Any, reports: list[dict[str, Any]]) -> ToolContext:
    async def report(update: dict[str, Any]) -> None:
        reports.append(update)

    return ToolContext(workspace=LocalWorkspace(tmp_path), report=report)


async def todo(ctx: ToolContext, **args: Any) -> dict[str, Any]:
    spec = load_builtin_tools().get("todo")
    assert spec is not None
    return await invoke(spec, args, ctx)


async def test_replace_then_merge(ctx: ToolContext, reports: list[dict[str, Any]]) -> None:
    await todo(
        ctx,
        todos=[
            {"id": "1", "content": "Read code", "status": "in_progress"},
            {"id": "2", "content": "Fix bug"},
            {"id": "3", "content": "Write docs", "status": "pending"},
        ],
    )
    r = await todo(
        ctx,
        merge=True,
        todos=[
            {"id": "1", "status": "completed"},
            {"id": "3", "status": "cancelled"},
            {"id": "4", "content": "Run tests", "status": "pending"},
        ],
    )
    assert r["todos"] == [
        {"id": "1", "content": "Read code", "status": "completed"},
        {"id": "2", "content": "Fix bug", "status": "pending"},
        {"id": "3", "content": "Write docs", "status": "cancelled"},
        {"id": "4", "content": "Run tests", "status": "pending"},
    ]
    assert reports[-1] == {
        "plan": [
            {"content": "Read code", "priority": "medium", "status": "completed"},
            {"content": "Fix bug", "priority": "medium", "status": "pending"},
            {"content": "Run tests", "priority": "medium", "status": "pending"},
        ]
    }
    assert (await todo(ctx))["todos"] == r["todos"]  # no todos: read
    replaced = await todo(ctx, todos=[{"id": "9", "content": "Only this"}])
    assert replaced["todos"] == [{"id": "9", "content": "Only this", "status": "pending"}]


async def test_invalid_items_change_nothing(ctx: ToolContext, reports: list[dict[str, Any]]) -> None:
    await todo(ctx, todos=[{"id": "1", "content": "A"}])
    assert (
        "status"
        in (await todo(ctx, todos=[{"id": "1", "content": "A", "status": "done"}]))["error"]
    )
    assert "id" in (await todo(ctx, todos=[{"content": "no id"}]))["error"]
    assert "content" in (await todo(ctx, merge=True, todos=[{"id": "new"}]))["error"]
    assert "list" in (await todo(ctx, todos="1. do it"))["error"]
    assert (await todo(ctx))["todos"] == [{"id": "1", "content": "A", "status": "pending"}]
    assert len(reports) == 1


async def test_empty_read_without_report(tmp_path: Any) -> None:
    assert await todo(ToolContext(workspace=LocalWorkspace(tmp_path))) == {"todos": []}
