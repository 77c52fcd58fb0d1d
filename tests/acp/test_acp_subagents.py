"""Subagents through a real `talaria acp`: one tool card each, streaming its tool calls as
lines and ending with its summary; permission questions on that card with its name; the
unstable `subagent_update` only for clients that advertise `subagents`; cancel ends them all."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.acp_checks import check_turn
from tests.acp_harness import Editor
from tests.helpers import group_alive

GOAL = re.compile(r"goal:(\w+)")


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def route(body: dict[str, Any], story: Any) -> dict[str, Any] | None:
    user = next((m for m in body["messages"] if m["role"] == "user"), None)
    match = GOAL.match(str(user["content"])) if user else None
    if match is None:
        return None
    return story(match.group(1), sum(1 for m in body["messages"] if m["role"] == "tool"))


def writer(name: str, done: int) -> dict[str, Any]:
    if done < 2:
        return {"tool_calls": [call("write_file", path=f"{name}{done}.txt", content=name)]}
    return {"text": f"{name} wrote two files."}


DELEGATE = {"tool_calls": [call("delegate_task", tasks=[{"goal": "goal:a one"},
                                                        {"goal": "goal:b two"}])]}


def test_each_subagent_is_a_card_that_streams_its_calls_and_ends_with_its_summary(
        tmp_path: Path, fake_llm) -> None:
    fake_llm.respond = lambda body: route(body, writer)
    fake_llm.script([DELEGATE, {"text": "Both done."}])
    with Editor(tmp_path, fake_llm, permission=lambda p: "allow_once") as ed:
        ed.initialize()
        sid = ed.new_session()
        prompt_id = ed.send_prompt(sid, "split it")
        assert ed.result(prompt_id, timeout=30)["stopReason"] == "end_turn"
        cards = check_turn(ed, sid, prompt_id)
        asks = ed.permission_requests
        kinds = {u["sessionUpdate"] for u in ed.updates(sid)}
    subs = {i: c for i, c in cards.items() if "-sub" in i}
    assert len(subs) == 2 and all(c[0]["kind"] == "think" for c in subs.values())
    for card in subs.values():
        assert card[0]["title"].startswith(("Subagent 1: goal:a", "Subagent 2: goal:b"))
        progress = [u["content"][0]["content"]["text"] for u in card[1:] if u.get("content")]
        assert any(text.startswith("… Write") for text in progress)  # a call running
        final = card[-1]
        assert final["status"] == "completed"
        texts = [c["content"]["text"] for c in final["content"]]
        assert texts[0].count("✓ Write") == 2 and texts[1].endswith("wrote two files.")
    assert len(asks) == 4  # each write asked, on its subagent's card, with its name
    assert {a["toolCall"]["toolCallId"] for a in asks} == set(subs)
    assert all(re.match(r"Subagent [12]: Write [ab][01]\.txt$", a["toolCall"]["title"]) for a in asks)
    assert "subagent_update" not in kinds  # the client did not advertise `subagents`


def test_subagent_updates_for_a_client_that_advertises_subagents(tmp_path: Path, fake_llm) -> None:
    fake_llm.respond = lambda body: route(body, writer)
    fake_llm.script([DELEGATE, {"text": "Both done."}])
    with Editor(tmp_path, fake_llm, unstable=True) as ed:  # validated by the unstable schema
        ed.initialize(subagents={})
        sid = ed.new_session()
        ed.request("session/set_mode", {"sessionId": sid, "modeId": "accept_edits"})
        assert ed.prompt(sid, "split it", timeout=30)["stopReason"] == "end_turn"
        updates = ed.updates(sid, "subagent_update")
    by_child: dict[str, list[dict[str, Any]]] = {}
    for update in updates:
        by_child.setdefault(update["sessionId"], []).append(update)
    assert len(by_child) == 2
    for states in by_child.values():
        assert [u["state"]["state"] for u in states] == ["running", "idle"]
        assert states[-1]["state"]["stopReason"] == "end_turn"
        assert states[0]["title"] in ("Subagent 1", "Subagent 2")


@pytest.mark.parametrize("terminal", [False, True], ids=["agent-commands", "editor-terminals"])
def test_cancel_ends_every_subagent_card_and_process(tmp_path: Path, fake_llm, terminal: bool) -> None:
    def sleeper(name: str, done: int) -> dict[str, Any]:
        return {"tool_calls": [call("terminal", command=f"echo $$ > {name}.pid; sleep 30")]}

    fake_llm.respond = lambda body: route(body, sleeper)
    fake_llm.script([DELEGATE])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize(terminal=terminal)
        sid = ed.new_session()
        prompt_id = ed.send_prompt(sid, "split it")  # allowed once each: they run unconfined
        pids = [ed.project / f"{n}.pid" for n in "ab"]
        ed.wait_for(lambda: all(p.exists() and p.read_text().strip() for p in pids),
                    what="both subagents' commands", timeout=30)
        assert all(group_alive(int(p.read_text())) for p in pids)
        ed.cancel(sid)
        assert ed.result(prompt_id, timeout=30)["stopReason"] == "cancelled"
        cards = check_turn(ed, sid, prompt_id)  # every card ended
    assert [c[-1]["status"] for i, c in cards.items() if "-sub" in i] == ["failed", "failed"]
    assert not any(group_alive(int(p.read_text())) for p in pids)
