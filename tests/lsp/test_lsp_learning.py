"""Self-improvement through a real `talaria lsp`, as through ACP (the same session host): the
background review runs after a request's answer is returned, never before it; what it saves
reaches the editor as a `talaria/update` notice and lands in the skills folder."""

from __future__ import annotations

import asyncio
from pathlib import Path

import anyio
import pytest

from tests.acp.test_acp_learning import ENV, SKILL, WORK
from tests.fakellm import FakeLLM
from tests.lsp.lsp_editor import TIMEOUT, LspEditor, lsp_editor

pytestmark = pytest.mark.asyncio


def notices(ed: LspEditor) -> str:
    return " ".join(str(u.get("content", u)) for u in ed.updates_of("agent_message_chunk")) + \
        " ".join(str(u) for u in (x["update"] for x in ed.updates) if "Saved skill" in str(u))


async def test_the_review_runs_after_the_answer_and_saves_a_skill(tmp_path: Path) -> None:
    with FakeLLM() as llm:
        create = {"name": "skill_manage", "arguments": {"action": "create", "name": "fix-flaky-pytest",
                                                        "content": SKILL}}
        llm.script([*WORK, {"tool_calls": [create]}, {"text": "Saved."}])
        async with lsp_editor(tmp_path, llm, env=ENV) as ed:
            result = await ed.command("talaria.ask", "fix the flaky test")
            assert result["stopReason"] == "end_turn" and result["answer"] == "Fixed."
            assert len(llm.requests) >= 2  # the turn's; the review's may follow at once
            skill = tmp_path / "home/skills/fix-flaky-pytest/SKILL.md"
            with anyio.fail_after(TIMEOUT):
                while not (skill.is_file() and "Saved skill" in notices(ed)):
                    await asyncio.sleep(0.05)
    assert "Background review" in str(llm.requests[2]["json"]["messages"][-1]["content"])
    assert "Pin the seed." in skill.read_text()
