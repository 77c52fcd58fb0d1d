"""The diff shown with a permission question: computed by the tool's preview, only when asked."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from talaria.agent.permissions import PermissionAsk
from talaria.agent.providers.base import ToolCallRequest
from talaria.agent.tool_runner import run_tool_calls
from talaria.tools.local.workspace import LocalWorkspace
from tests.helpers import make_session


class CountingWorkspace(LocalWorkspace):
    """The real local workspace, counting whole-file reads (a preview is one more read)."""

    reads = 0

    async def read_text(self, path: Path) -> str:
        self.reads += 1
        return await super().read_text(path)


class Asker:
    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[PermissionAsk] = []

    async def __call__(self, ask: PermissionAsk) -> str:
        self.asked.append(ask)
        return self.answer


def patch_call(path: str = "a.txt") -> ToolCallRequest:
    args = {"path": path, "old_string": "one", "new_string": "two"}
    return ToolCallRequest("call_1", "patch", json.dumps(args))


def run(fake_llm, tmp_path: Path, mode: str, answer: str, call: ToolCallRequest):
    session = make_session(fake_llm, tmp_path, mode=mode)
    session.door.workspace = workspace = CountingWorkspace(session.cwd)
    session.permissions.asker = asker = Asker(answer)
    (session.cwd / "a.txt").write_text("one\n")
    anyio.run(run_tool_calls, session, [call])
    return session, workspace, asker


@pytest.mark.parametrize(("answer", "after"), [("allow_once", "two\n"), ("reject_once", "one\n")])
def test_the_question_carries_the_diff(fake_llm, tmp_path: Path, answer: str, after: str) -> None:
    session, workspace, asker = run(fake_llm, tmp_path, "default", answer, patch_call())
    (ask,) = asker.asked
    assert ask.diff == {"path": str(session.cwd / "a.txt"), "old_text": "one\n", "new_text": "two\n"}
    assert (session.cwd / "a.txt").read_text() == after
    assert workspace.reads == (2 if answer == "allow_once" else 1)


@pytest.mark.parametrize("mode", ["accept_edits", "auto", "bypass"])
def test_no_preview_when_nobody_is_asked(fake_llm, tmp_path: Path, mode: str) -> None:
    session, workspace, asker = run(fake_llm, tmp_path, mode, "reject_once", patch_call())
    assert not asker.asked and workspace.reads == 1  # only the edit's own read
    assert (session.cwd / "a.txt").read_text() == "two\n"


def test_no_preview_when_the_mode_refuses_without_asking(fake_llm, tmp_path: Path) -> None:
    session, workspace, asker = run(fake_llm, tmp_path, "dont_ask", "allow_once", patch_call())
    assert not asker.asked and workspace.reads == 0
    assert (session.cwd / "a.txt").read_text() == "one\n"


def test_tools_without_a_preview_are_asked_without_a_diff(fake_llm, tmp_path: Path) -> None:
    command = ToolCallRequest("call_1", "terminal", json.dumps({"command": "true"}))
    _, workspace, asker = run(fake_llm, tmp_path, "default", "reject_once", command)
    (ask,) = asker.asked
    assert ask.diff is None and workspace.reads == 0


def test_a_crashing_preview_still_asks_and_the_edit_still_runs(fake_llm, tmp_path: Path) -> None:
    async def broken(args, ctx):
        raise RuntimeError("preview bug")

    session = make_session(fake_llm, tmp_path, mode="default")
    session.tools = [replace(s, preview=broken) if s.name == "patch" else s for s in session.tools]
    session.permissions.asker = asker = Asker("allow_once")
    (session.cwd / "a.txt").write_text("one\n")
    anyio.run(run_tool_calls, session, [patch_call()])
    assert [a.diff for a in asker.asked] == [None]
    assert (session.cwd / "a.txt").read_text() == "two\n"
