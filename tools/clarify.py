"""`clarify`: ask the user a question mid-task (Hermes-compatible), optionally with choices.

The question goes through `ctx.state.clarify`, which the runtime sets from the session's front
door: an editor shows a form (ACP elicitation) or a question whose options are the choices.
Where nobody can be asked (headless runs, `dont_ask` mode, subagents) it is None and the model
is told there is no answer, so it goes on with its best judgement rather than waiting.
"""

from __future__ import annotations

from typing import Any

from talaria.tools.context import ToolContext
from talaria.tools.handoffs import Answer, Clarifier, Question
from talaria.tools.registry import tool

__all__ = ["NO_ANSWER", "OTHER", "Answer", "Clarifier", "Question", "clarify"]

MAX_QUESTION_CHARS = 2000
MAX_CHOICES = 8
MAX_CHOICE_CHARS = 200
OTHER = "Other"
"""The choice a form adds so the user can answer in their own words."""
NO_ANSWER = ("No answer available: nobody can be asked in this session (a headless run, "
             "dont_ask mode, or a subagent). Go on with your best judgement and say what you "
             "assumed.")




def _choices(raw: Any) -> tuple[str, ...] | str:
    """The cleaned choices, or an error message."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(c, str) for c in raw):
        return "choices must be a list of strings"
    cleaned = tuple(dict.fromkeys(c.strip() for c in raw if c.strip()))
    if len(cleaned) > MAX_CHOICES:
        return f"at most {MAX_CHOICES} choices (an `{OTHER}` answer is always offered)"
    if any(len(c) > MAX_CHOICE_CHARS for c in cleaned):
        return f"each choice must be at most {MAX_CHOICE_CHARS} characters"
    return cleaned


@tool(
    name="clarify",
    description="Ask the user a question you cannot settle yourself; give choices when known.",
    parameters={
        "type": "object",
        "properties": {
            "question": {"type": "string"},
            "choices": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["question"],
    },
    kind="think",
    title=lambda a: f"Question: {str(a['question'])[:80]}",
)
async def clarify(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    question = args.get("question")
    if not isinstance(question, str) or not question.strip():
        return {"error": "question must be a non-empty string"}
    if len(question) > MAX_QUESTION_CHARS:
        return {"error": f"the question is longer than {MAX_QUESTION_CHARS} characters; ask "
                         "something shorter"}
    choices = _choices(args.get("choices"))
    if isinstance(choices, str):
        return {"error": choices}
    ask = ctx.state.clarify
    if ask is None:
        return {"answer": None, "note": NO_ANSWER}
    answer = await ask(Question(question.strip(), choices, ctx.tool_call_id))
    if answer.text is None:
        return {"answer": None, "note": answer.note or NO_ANSWER}
    return {"answer": answer.text}
