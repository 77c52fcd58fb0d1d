"""`talaria lsp` end to end: document sync, the commands, edits through workspace/applyEdit,
progress, `talaria/update`; a real server process, pytest-lsp's client, the fake LLM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fakellm import FakeLLM
from tests.lsp.lsp_editor import lsp_editor

pytestmark = pytest.mark.asyncio


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def whole(text: str) -> dict[str, Any]:
    lines = text.count("\n")
    return {"start": {"line": 0, "character": 0}, "end": {"line": lines, "character": 0}}


async def test_read_file_sees_the_unsaved_buffer(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script([{"tool_calls": [call("read_file", path="a.py")]}, {"text": "It sets x."}])
    async with lsp_editor(tmp_path, fake_llm) as ed:
        (ed.root / "a.py").write_text("x = 'on disk'\n")
        uri = ed.open("a.py")
        ed.change(uri, "x = 'unsaved'\n")
        result = await ed.command("talaria.ask", "What is x?")
    assert result["stopReason"] == "end_turn" and result["answer"] == "It sets x."
    tool_result = str(fake_llm.requests[1]["json"]["messages"][-1])
    assert "unsaved" in tool_result and "on disk" not in tool_result
