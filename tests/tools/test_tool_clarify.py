"""`clarify` at the tool level: its bounds, and "no answer available" where nobody is asked."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from talaria.agent.loop import run_turn
from talaria.tools.clarify import (
    MAX_CHOICE_CHARS,
    MAX_CHOICES,
    MAX_QUESTION_CHARS,
    NO_ANSWER,
    Answer,
    Question,
    clarify,
)
from talaria.tools.context import ToolContext
from talaria.tools.local.workspace import LocalWorkspace
from tests.helpers import make_session


def run(args: dict, tmp_path: Path, answer: Answer | None = None) -> tuple[dict, list[Question]]:
    asked: list[Question] = []
    ctx = ToolContext(LocalWorkspace(tmp_path), tool_call_id="c1")
    if answer is not None:
        async def ask(question: Question) -> Answer:
            asked.append(question)
            return answer
        ctx.state.clarify = ask
    return anyio.run(clarify, args, ctx), asked


@pytest.mark.parametrize(("args", "error"), [
    ({"question": " "}, "non-empty"),
    ({"question": "x" * (MAX_QUESTION_CHARS + 1)}, f"longer than {MAX_QUESTION_CHARS}"),
    ({"question": "q", "choices": [f"c{i}" for i in range(MAX_CHOICES + 1)]}, f"at most {MAX_CHOICES}"),
    ({"question": "q", "choices": ["x" * (MAX_CHOICE_CHARS + 1)]}, f"at most {MAX_CHOICE_CHARS}"),
    ({"question": "q", "choices": "a,b"}, "list of strings"),
])
def test_bad_questions_are_errors_and_ask_nobody(tmp_path: Path, args: dict, error: str) -> None:
    result, asked = run(args, tmp_path, Answer("never"))
    assert error in result["error"] and asked == []


def test_choices_at_the_limit_are_cleaned_and_asked(tmp_path: Path) -> None:
    choices = [f" c{i} " for i in range(MAX_CHOICES)] + ["c0", ""]  # a duplicate, a blank
    result, (question,) = run({"question": " Which? ", "choices": choices}, tmp_path, Answer("c3"))
    assert result == {"answer": "c3"}
    assert question == Question("Which?", tuple(f"c{i}" for i in range(MAX_CHOICES)), "c1")


def test_without_anyone_to_ask_the_model_is_told_so(tmp_path: Path) -> None:
    result, _ = run({"question": "Which?"}, tmp_path)
    assert result == {"answer": None, "note": NO_ANSWER}


def test_a_headless_session_answers_no_answer_available(tmp_path: Path, fake_llm) -> None:
    session = make_session(fake_llm, tmp_path)  # a LocalDoor: nobody to ask
    fake_llm.script([{"tool_calls": [{"name": "clarify", "arguments": {"question": "Which?"}}]},
                     {"text": "I assumed SQLite."}])
    assert anyio.run(run_turn, session, "go") == "end_turn"
    tool = [m for m in session.messages if m["role"] == "tool"][0]
    assert NO_ANSWER in tool["content"]
