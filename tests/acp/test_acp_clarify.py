"""`clarify` over ACP: an elicitation form when the client advertises it, a permission-style
question otherwise, no question at all in dont_ask mode; cancelling ends the turn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from talaria.acp_server.questions import DECLINED, LATER
from talaria.tools.clarify import NO_ANSWER, OTHER
from tests.acp_checks import check_turn
from tests.acp_harness import AGENT_TO_CLIENT, Editor

QUESTION = "Which database should the cache use?"
CHOICES = ["SQLite", "Redis"]


def ask(choices: list[str] | None = CHOICES) -> list[dict[str, Any]]:
    args: dict[str, Any] = {"question": QUESTION}
    if choices is not None:
        args["choices"] = choices
    return [{"tool_calls": [{"name": "clarify", "arguments": args}]}, {"text": "Thanks."}]


def clarify_result(llm: Any) -> dict[str, Any]:
    """What the model was told: the clarify call's result in the next request."""
    tool = [m for m in llm.requests[1]["json"]["messages"] if m["role"] == "tool"][-1]
    return json.loads(tool["content"])


@pytest.mark.parametrize(("reply", "expected"), [
    ({"action": "accept", "content": {"answer": "Redis"}}, {"answer": "Redis"}),
    ({"action": "accept", "content": {"answer": OTHER, "other": "Postgres"}}, {"answer": "Postgres"}),
    ({"action": "decline"}, {"answer": None, "note": DECLINED}),
], ids=["choice", "other", "decline"])
def test_a_form_when_the_client_advertises_elicitation(tmp_path: Path, fake_llm, reply, expected) -> None:
    fake_llm.script(ask())
    with Editor(tmp_path, fake_llm) as ed:
        ed.elicit = lambda params: reply
        ed.initialize(elicitation={"form": {}})
        sid = ed.new_session()
        prompt_id = ed.send_prompt(sid, "set up caching")
        assert ed.result(prompt_id)["stopReason"] == "end_turn"
        cards = check_turn(ed, sid, prompt_id)
        (form,) = ed.elicitations
    (card_id,) = cards
    assert form["mode"] == "form" and form["message"] == QUESTION and form["toolCallId"] == card_id
    assert form["requestedSchema"]["properties"]["answer"]["enum"] == [*CHOICES, OTHER]
    assert not ed.permission_requests  # the form was the question
    assert clarify_result(fake_llm) == expected


def test_a_question_without_choices_is_one_free_text_field(tmp_path: Path, fake_llm) -> None:
    fake_llm.script(ask(None))
    with Editor(tmp_path, fake_llm) as ed:
        ed.elicit = lambda params: {"action": "accept", "content": {"answer": "  whatever is fastest "}}
        ed.initialize(elicitation={"form": {}})
        sid = ed.new_session()
        assert ed.prompt(sid, "set up caching")["stopReason"] == "end_turn"
        (form,) = ed.elicitations
    assert form["requestedSchema"]["properties"] == {"answer": {"type": "string", "title": "Your answer"}}
    assert clarify_result(fake_llm) == {"answer": "whatever is fastest"}


@pytest.mark.parametrize(("choices", "pick", "expected"), [
    (CHOICES, "choice-1", {"answer": "Redis"}),
    (CHOICES, "skip", None),
    (None, "later", {"answer": None, "note": LATER}),
], ids=["choice", "skip", "later"])
def test_a_permission_style_question_without_elicitation(tmp_path: Path, fake_llm, choices, pick,
                                                         expected) -> None:
    fake_llm.script(ask(choices))
    with Editor(tmp_path, fake_llm, permission=pick) as ed:
        ed.initialize()
        sid = ed.new_session()
        prompt_id = ed.send_prompt(sid, "set up caching")
        assert ed.result(prompt_id)["stopReason"] == "end_turn"
        check_turn(ed, sid, prompt_id)
        (request,) = ed.permission_requests
    assert request["toolCall"]["title"] == QUESTION
    names = [o["name"] for o in request["options"]]
    assert names == ([*CHOICES, "Skip the question"] if choices else
                     ["I'll answer in my next message", "Skip the question"])
    result = clarify_result(fake_llm)
    if expected is None:
        assert result["answer"] is None and "skipped" in result["note"]
    else:
        assert result == expected


def test_no_question_in_dont_ask_mode(tmp_path: Path, fake_llm) -> None:
    fake_llm.script(ask())
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize(elicitation={"form": {}})
        sid = ed.new_session()
        ed.request("session/set_mode", {"sessionId": sid, "modeId": "dont_ask"})
        assert ed.prompt(sid, "set up caching")["stopReason"] == "end_turn"
        asked = ed.elicitations + ed.permission_requests
    assert asked == []
    assert clarify_result(fake_llm) == {"answer": None, "note": NO_ANSWER}


@pytest.mark.parametrize("form", [True, False], ids=["form", "permission-style"])
def test_cancel_during_a_question_ends_the_turn_cancelled(tmp_path: Path, fake_llm, form: bool) -> None:
    fake_llm.script(ask())
    with Editor(tmp_path, fake_llm, permission=None) as ed:  # nobody answers
        ed.initialize(**({"elicitation": {"form": {}}} if form else {}))
        sid = ed.new_session()
        prompt_id = ed.send_prompt(sid, "set up caching")
        ed.wait_for(lambda: ed.elicitations or ed.permission_requests, what="the question")
        ed.cancel(sid)
        assert ed.result(prompt_id)["stopReason"] == "cancelled"
        cards = check_turn(ed, sid, prompt_id)
        if form:  # the unanswered form is withdrawn (its $/cancel_request may follow the answer)
            ed.wait_for(lambda: [m for d, m in ed.transcript()
                                 if d == AGENT_TO_CLIENT and m.get("method") == "$/cancel_request"],
                        what="the form's $/cancel_request")
        # A permission-style question is either withdrawn the same way or answered `cancelled`
        # by the editor, as ACP asks of it on session/cancel: whichever comes first ends it.
    (card,) = cards.values()
    assert card[-1]["status"] == "failed"
    assert fake_llm.served == 1  # the model was not called again


def test_a_form_cancelled_by_the_user_ends_the_turn_cancelled(tmp_path: Path, fake_llm) -> None:
    fake_llm.script(ask())
    with Editor(tmp_path, fake_llm) as ed:
        ed.elicit = lambda params: {"action": "cancel"}
        ed.initialize(elicitation={"form": {}})
        sid = ed.new_session()
        assert ed.prompt(sid, "set up caching")["stopReason"] == "cancelled"
    assert fake_llm.served == 1
