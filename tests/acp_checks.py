"""Assertions over an `Editor` transcript: the ACP rules of a prompt turn, and process checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.acp_harness import Editor
from tests.acpschema import AGENT_TO_CLIENT, CLIENT_TO_AGENT


def text_of_requests(llm: Any) -> str:
    """Everything the fake LLM was sent, as one JSON string (to look for what the model saw)."""
    return json.dumps([r["json"] for r in llm.requests], ensure_ascii=False)


def check_turn(ed: Editor, session_id: str, prompt_id: int) -> dict[str, list[dict[str, Any]]]:
    """Assert the ACP rules of one finished prompt turn; return its tool cards by id.

    Every card starts `tool_call` / `pending` with a title, a kind, absolute locations and
    rawInput; a permission request names a card already shown and comes before it runs (a
    `think` card, a question or a subagent, may ask while it runs, never after it ends); a
    card goes `in_progress` at most once and ends with exactly one `completed` / `failed`;
    nothing about the session is sent after the prompt's response.
    """
    ed.sync()
    transcript = ed.transcript()
    start = next(i for i, (d, m) in enumerate(transcript)
                 if d == CLIENT_TO_AGENT and m.get("id") == prompt_id and m.get("method") == "session/prompt")
    end = next(i for i, (d, m) in enumerate(transcript)
               if i > start and d == AGENT_TO_CLIENT and m.get("id") == prompt_id and "method" not in m)
    cards: dict[str, list[dict[str, Any]]] = {}
    finished: set[str] = set()
    for direction, msg in transcript[start:end]:
        if direction != AGENT_TO_CLIENT:
            continue
        params = msg.get("params") or {}
        if msg.get("method") == "session/request_permission":
            call_id = params["toolCall"]["toolCallId"]
            assert call_id in cards, f"permission asked before its tool_call: {call_id}"
            assert call_id not in finished, f"permission asked after {call_id} finished"
            # A `think` card asks while it runs: a clarify question, a subagent's tool call.
            if cards[call_id][0]["kind"] != "think":
                statuses = [u.get("status") for u in cards[call_id][1:]]
                assert not any(statuses), f"permission asked after {call_id} started: {statuses}"
            continue
        if msg.get("method") != "session/update" or params.get("sessionId") != session_id:
            continue
        update = params["update"]
        kind, call_id = update["sessionUpdate"], update.get("toolCallId")
        if kind == "tool_call":
            assert call_id not in cards, f"tool_call {call_id} sent twice"
            assert update["status"] == "pending" and update["title"] and update["kind"]
            assert isinstance(update.get("rawInput"), dict)
            for loc in update.get("locations") or ():
                assert Path(loc["path"]).is_absolute() and ":" not in loc["path"], loc
            cards[call_id] = [update]
        elif kind == "tool_call_update":
            assert call_id in cards, f"update of unknown tool call {call_id}"
            assert call_id not in finished, f"{call_id} updated after it finished: {update}"
            status = update.get("status")
            if status == "in_progress":
                assert not any(u.get("status") for u in cards[call_id][1:]), f"{call_id} started twice"
            elif status in ("completed", "failed"):
                assert update.get("content"), f"{call_id} finished without content"
                finished.add(call_id)
            else:
                assert status is None, f"unexpected status {status!r}"
            cards[call_id].append(update)
    assert set(cards) == finished, f"tool calls left unfinished: {set(cards) - finished}"
    later = []
    for direction, msg in transcript[end + 1:]:
        if direction == CLIENT_TO_AGENT and msg.get("method") == "session/prompt":
            break  # the next turn
        if msg.get("method") == "session/update" and msg["params"]["sessionId"] == session_id:
            later.append(msg["params"]["update"])
    assert not later, f"session/update after the prompt's response: {later[:2]}"
    return cards


def final(card: list[dict[str, Any]]) -> dict[str, Any]:
    """The finishing update of a card."""
    return card[-1]
