"""The terminal permission policy: what a person is shown, and its bounds."""

from __future__ import annotations

import os

import anyio

from talaria.acp_server.client.policies import (
    MAX_ANSWER_BYTES,
    MAX_DIFF_LINES,
    MAX_LINE_CHARS,
    _read_line,
    allow_all,
    diff_lines,
    question,
)
from talaria.acp_server.door import PERMISSION_OPTIONS


def params(*content: dict) -> dict:
    return {"sessionId": "s", "options": PERMISSION_OPTIONS,
            "toolCall": {"toolCallId": "c1", "title": "Edit a.py", "kind": "edit", "content": list(content)}}


def diff(old: str | None, new: str, path: str = "/p/a.py") -> dict:
    return {"type": "diff", "path": path, "oldText": old, "newText": new}


def test_the_question_shows_the_diff_then_the_notes_then_the_menu() -> None:
    note = {"type": "content", "content": {"type": "text", "text": "Asking because: outside the project"}}
    text = question(params(diff("a\nb\n", "a\nc\n"), note))
    assert text.splitlines() == [
        "", "Allow Edit a.py?", "  --- /p/a.py", "  +++ /p/a.py", "  @@ -1,2 +1,2 @@", "   a", "  -b",
        "  +c", "  Asking because: outside the project",
        "  [y] Allow once  [a] Always allow  [n] Reject  [N] Always reject", "> "]


def test_a_new_file_is_shown_whole_and_colors_are_optional() -> None:
    assert diff_lines(diff(None, "x\ny\n")) == ["new file /p/a.py", "+x", "+y"]
    colored = question(params(diff("a\n", "b\n")), color=True)
    assert "\x1b[31m-a\x1b[0m" in colored and "\x1b[32m+b\x1b[0m" in colored
    assert "--- /p/a.py" in colored and "\x1b[31m---" not in colored  # headers stay plain
    assert diff_lines(diff("same\n", "same\n")) == ["/p/a.py: no change"]


def test_a_long_diff_and_a_long_line_are_cut() -> None:
    old = "".join(f"line {i}\n" for i in range(500))
    lines = diff_lines(diff(old, ""))
    assert len(lines) == MAX_DIFF_LINES + 1
    assert lines[-1] == f"… {3 + 500 - MAX_DIFF_LINES} more diff lines"  # 3 header lines
    (wide,) = [ln for ln in diff_lines(diff(None, "x" * 10_000)) if ln.startswith("+")]
    assert wide == "+" + "x" * (MAX_LINE_CHARS - 1) + " …"


def test_an_answer_is_one_line_and_an_endless_one_is_no_answer() -> None:
    def answer(data: bytes) -> str:
        read, write = os.pipe()
        try:
            os.write(write, data)
            os.close(write)
            return anyio.run(_read_line, read)
        finally:
            os.close(read)

    assert answer(b" y \n") == "y"
    assert answer(b"") == ""  # Ctrl-D
    assert answer(b"y" * MAX_ANSWER_BYTES + b"\n") == "y" * MAX_ANSWER_BYTES
    assert answer(b"y" * (MAX_ANSWER_BYTES + 2) + b"\n") == ""


def ask_params() -> dict:
    """A `clarify` question as the agent asks it without elicitation (acp_server.questions)."""
    return {"sessionId": "s", "options": [
        {"optionId": "choice-0", "name": "SQLite", "kind": "allow_once"},
        {"optionId": "choice-1", "name": "Redis", "kind": "allow_once"},
        {"optionId": "skip", "name": "Skip the question", "kind": "reject_once"}],
        "toolCall": {"toolCallId": "c1", "title": "Which cache?", "kind": "think",
                     "_meta": {"talaria": {"question": True}}}}


def test_allowing_every_tool_call_skips_questions_instead_of_answering_them() -> None:
    assert anyio.run(allow_all, ask_params()) == "skip"
    assert anyio.run(allow_all, params()) == "allow_once"  # a tool call is still allowed


def test_a_question_on_the_terminal_is_numbered() -> None:
    assert question(ask_params()).splitlines()[1:] == [
        "Question: Which cache?", "  [1] SQLite  [2] Redis  [3] Skip the question", "> "]
