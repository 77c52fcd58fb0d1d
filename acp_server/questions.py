"""The `clarify` tool's questions over ACP: an elicitation form, or a permission-style question.

With `elicitation.form` advertised the question is `elicitation/create` (mode `form`): a
single-select `answer` of the choices plus "Other", and an `other` text field for an answer in
the user's own words (no choices: one free-text field). Otherwise it is a
`session/request_permission` on the `clarify` card whose options are the choices, plus "Skip";
a question without choices then offers "I'll answer in my next message". Its tool call carries
`_meta.talaria.question`, so a client that allows tool calls unasked (`talaria run --yes`)
skips questions instead of picking an answer for the user. A client that fails
the form gets the permission-style question instead. Cancelling ends the turn (the caller's
job: `Answer.cancelled`).
"""

from __future__ import annotations

import logging
from typing import Any

from talaria.acp_server.jsonrpc import Peer, PeerError, RpcError
from talaria.tools.clarify import OTHER
from talaria.tools.handoffs import Answer, Question

log = logging.getLogger(__name__)

SKIPPED = ("The user skipped the question. Go on with your best judgement and say what you "
           "assumed.")
DECLINED = "The user declined to answer. Go on with your best judgement and say what you assumed."
LATER = ("The user will answer in their next message: end your turn now with a short summary "
         "of where you are, and wait for it.")
CANCELLED = Answer(None, "The user cancelled the question.", cancelled=True)


async def ask(peer: Peer, session_id: str, question: Question, *, form: bool) -> Answer:
    if form:
        try:
            return await _elicit(peer, session_id, question)
        except RpcError as exc:  # advertised but failed: the question still gets asked
            log.warning("elicitation/create failed (%s); asking with options instead", exc)
        except PeerError:
            return CANCELLED
    return await _options(peer, session_id, question)


def form_schema(question: Question) -> dict[str, Any]:
    """The `requestedSchema` of the elicitation form."""
    if not question.choices:
        properties: dict[str, Any] = {"answer": {"type": "string", "title": "Your answer"}}
    else:
        properties = {
            "answer": {"type": "string", "title": "Your answer",
                       "enum": [*question.choices, OTHER]},
            "other": {"type": "string", "title": f"{OTHER}: your own answer"},
        }
    return {"type": "object", "properties": properties, "required": ["answer"]}


async def _elicit(peer: Peer, session_id: str, question: Question) -> Answer:
    result = await peer.request("elicitation/create", {
        "sessionId": session_id, "toolCallId": question.tool_call_id, "mode": "form",
        "message": question.text, "requestedSchema": form_schema(question),
    }, timeout=None)
    action = result.get("action") if isinstance(result, dict) else None
    if action == "decline":
        return Answer(None, DECLINED)
    if action != "accept":
        return CANCELLED
    content = result.get("content") if isinstance(result.get("content"), dict) else {}
    answer, other = content.get("answer"), content.get("other")
    if answer == OTHER and question.choices:
        answer = other
    if isinstance(answer, str | int | float | bool) and str(answer).strip():
        return Answer(str(answer).strip())
    return Answer(None, SKIPPED)


async def _options(peer: Peer, session_id: str, question: Question) -> Answer:
    options = [{"optionId": f"choice-{i}", "name": choice, "kind": "allow_once"}
               for i, choice in enumerate(question.choices)]
    if not options:
        options = [{"optionId": "later", "name": "I'll answer in my next message",
                    "kind": "allow_once"}]
    options.append({"optionId": "skip", "name": "Skip the question", "kind": "reject_once"})
    try:
        result = await peer.request("session/request_permission", {
            "sessionId": session_id, "options": options,
            "toolCall": {"toolCallId": question.tool_call_id, "title": question.text,
                         "kind": "think", "_meta": {"talaria": {"question": True}}},
        }, timeout=None)
    except RpcError as exc:  # a client that cannot ask
        log.warning("session/request_permission failed for a question: %s", exc)
        return Answer(None, SKIPPED)
    except PeerError:
        return CANCELLED
    outcome = result.get("outcome") if isinstance(result, dict) else None
    if not isinstance(outcome, dict) or outcome.get("outcome") != "selected":
        return CANCELLED
    chosen = str(outcome.get("optionId"))
    if chosen.startswith("choice-") and chosen[7:].isdigit() and int(chosen[7:]) < len(question.choices):
        return Answer(question.choices[int(chosen[7:])])
    return Answer(None, LATER if chosen == "later" else SKIPPED)
