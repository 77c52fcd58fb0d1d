"""Prompts during a turn over ACP: queued (not rejected) and answered in order, `/queue`,
`/queue clear`, cancel of the running turn only, `/steer`, and the keepalive chunk."""

from __future__ import annotations

from pathlib import Path

from tests.acp_harness import AGENT_TO_CLIENT, Editor


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def slow_turn(seconds: float, then: str) -> list[dict[str, object]]:
    return [{"tool_calls": [call("terminal", command=f"sleep {seconds}")]}, {"text": then}]


def response_order(ed: Editor, ids: list[int]) -> list[int]:
    return [m["id"] for d, m in ed.transcript()
            if d == AGENT_TO_CLIENT and "method" not in m and m.get("id") in ids]


def notices(ed: Editor, sid: str) -> str:
    return "".join(u["content"]["text"] for u in ed.updates(sid, "agent_message_chunk"))


def running(ed: Editor) -> None:
    """Wait until the first turn's command runs (the model asked for it)."""
    ed.wait_for(lambda: len(ed.llm.requests) >= 1 and ed.updates(None, "tool_call"),
                what="the running turn's command")


def test_a_prompt_during_a_turn_waits_and_is_answered_after_it(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([*slow_turn(1, "First done."), {"text": "Second done."}, {"text": "Third done."}])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize(terminal=False)
        sid = ed.new_session()
        first = ed.send_prompt(sid, "slow one")
        running(ed)
        second = ed.send_prompt(sid, "next one")
        third = ed.send_prompt(sid, "and then this")
        results = [ed.result(i, timeout=20) for i in (first, second, third)]
        order = response_order(ed, [first, second, third])
        said = notices(ed, sid)
    assert [r["stopReason"] for r in results] == ["end_turn"] * 3
    assert order == [first, second, third]
    assert "Queued: this prompt runs after the current turn (1 ahead of it)" in said
    assert "(2 ahead of it)" in said
    # Each queued prompt started its own turn only after the previous one ended.
    last_user = [str([m for m in r["json"]["messages"] if m["role"] == "user"][-1]["content"])
                 for r in fake_llm.requests]
    assert ["slow one" in last_user[0], "slow one" in last_user[1]] == [True, True]
    assert "next one" in last_user[2] and "and then this" in last_user[3]


def test_queue_lists_and_clear_drops_waiting_prompts(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([*slow_turn(1.5, "First done.")])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize(terminal=False)
        sid = ed.new_session()
        first = ed.send_prompt(sid, "slow one")
        running(ed)
        waiting = [ed.send_prompt(sid, f"waiting {i}") for i in (1, 2)]
        ed.wait_for(lambda: notices(ed, sid).count("Queued") == 2, what="two queued notices")
        listed = ed.prompt(sid, "/queue")
        listing = notices(ed, sid)
        cleared = ed.prompt(sid, "/queue clear")
        dropped = [ed.result(i) for i in waiting]
        assert ed.result(first, timeout=20)["stopReason"] == "end_turn"
        said = notices(ed, sid)
    assert listed == cleared == {"stopReason": "end_turn"}  # no turn ran: no usage
    assert "2 prompt(s) waiting" in listing and "1. waiting 1" in listing and "2. waiting 2" in listing
    assert dropped == [{"stopReason": "cancelled"}] * 2  # never reached the model
    assert "Dropped 2 waiting prompt(s)." in said
    assert fake_llm.served == 2  # the dropped prompts never reached the model


def test_cancel_cancels_the_running_turn_only(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"tool_calls": [call("terminal", command="sleep 30")]}, {"text": "Second done."}])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize(terminal=False)
        sid = ed.new_session()
        first = ed.send_prompt(sid, "slow one")
        running(ed)
        second = ed.send_prompt(sid, "next one")
        ed.wait_for(lambda: "Queued" in notices(ed, sid), what="the queued notice")
        ed.cancel(sid)
        results = [ed.result(first, timeout=20), ed.result(second, timeout=20)]
    assert [r["stopReason"] for r in results] == ["cancelled", "end_turn"]


def test_steer_is_acknowledged_and_reaches_the_next_model_call(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([*slow_turn(1, "Done.")])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize(terminal=False)
        sid = ed.new_session()
        first = ed.send_prompt(sid, "slow one")
        running(ed)
        assert ed.prompt(sid, "/steer prefer pathlib over os.path")["stopReason"] == "end_turn"
        acknowledged = "Steering note noted" in notices(ed, sid)
        assert ed.result(first, timeout=20)["stopReason"] == "end_turn"
        late = ed.prompt(sid, "/steer too late")  # nothing runs: sent as a prompt
    assert acknowledged
    second_call, late_call = fake_llm.requests[1:]
    assert "prefer pathlib over os.path" in str(second_call["json"]["messages"][-1]["content"])
    assert late["stopReason"] == "end_turn"
    assert late_call["json"]["messages"][-1]["content"] == "too late"


def test_keepalive_sends_empty_chunks_during_a_silent_tool_run(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([*slow_turn(1.2, "Done.")])
    with Editor(tmp_path, fake_llm, env={"TALARIA_KEEPALIVE_S": "0.25"}) as ed:
        ed.initialize(terminal=False)
        sid = ed.new_session()
        assert ed.prompt(sid, "slow one", timeout=20)["stopReason"] == "end_turn"
        empty = [u for u in ed.updates(sid, "agent_message_chunk") if u["content"]["text"] == ""]
    assert len(empty) >= 2


def test_keepalive_off_when_zero(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([*slow_turn(0.8, "Done.")])
    with Editor(tmp_path, fake_llm, env={"TALARIA_KEEPALIVE_S": "0"}) as ed:
        ed.initialize(terminal=False)
        sid = ed.new_session()
        assert ed.prompt(sid, "slow one", timeout=20)["stopReason"] == "end_turn"
        empty = [u for u in ed.updates(sid, "agent_message_chunk") if u["content"]["text"] == ""]
    assert empty == []
