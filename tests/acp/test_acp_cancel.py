"""Cancellation end to end: session/cancel mid-command, mid-permission, mid-stream; $/cancel_request."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.acp_checks import check_turn, final
from tests.acp_harness import AGENT_TO_CLIENT, Editor
from tests.helpers import group_alive

CANCEL_DEADLINE = 30.0
"""A cancel must end the turn, and no later than this on a loaded machine: an outcome bound, not
a speed claim (how fast a cancel is: `python -m benchmarks execute_code`, cancel_latency)."""


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def cancel_and_time(ed: Editor, sid: str, prompt_id: int) -> tuple[dict, float]:
    started = time.monotonic()
    ed.cancel(sid)
    result = ed.result(prompt_id)
    return result, time.monotonic() - started


def test_cancel_kills_a_local_command_and_its_process_group(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"tool_calls": [call("terminal", command="echo $$ > pid.txt; sleep 30 & sleep 30")]}])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize(terminal=False)  # CodeCompanion-like: the agent runs the command itself
        sid = ed.new_session()
        prompt_id = ed.send_prompt(sid, "run it")
        pid_file = ed.project / "pid.txt"
        ed.wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), what="the command")
        pgid = int(pid_file.read_text())
        result, took = cancel_and_time(ed, sid, prompt_id)
        (card,) = check_turn(ed, sid, prompt_id).values()
        alive = group_alive(pgid)
        fake_llm.script([{"text": "next turn works"}])
        assert ed.prompt(sid, "again")["stopReason"] == "end_turn"
    assert result["stopReason"] == "cancelled" and took < CANCEL_DEADLINE
    assert not alive, "the command's process group outlived the cancel"
    assert final(card)["status"] == "failed"


@pytest.mark.parametrize("create_delay", [0, 0.3], ids=["running", "while-created"])
def test_cancel_releases_an_editor_terminal(tmp_path: Path, fake_llm, create_delay: float) -> None:
    """Even when the cancel comes before terminal/create is answered: that answer is awaited."""
    fake_llm.script([{"tool_calls": [call("terminal", command="sleep 30")]}])
    with Editor(tmp_path, fake_llm) as ed:
        ed.delays["terminal/create"] = create_delay
        ed.initialize()
        sid = ed.new_session()
        prompt_id = ed.send_prompt(sid, "run it")
        (term,) = ed.wait_for(lambda: list(ed.terminals.values()), what="the terminal")
        if not create_delay:
            ed.wait_for(lambda: ed.recorder.messages(AGENT_TO_CLIENT, "terminal/wait_for_exit"), what="the wait")
        result, took = cancel_and_time(ed, sid, prompt_id)
        check_turn(ed, sid, prompt_id)
        ed.wait_for(lambda: term.released, what="terminal/release")
        methods = [m.get("method") for d, m in ed.transcript() if d == AGENT_TO_CLIENT]
    assert result["stopReason"] == "cancelled" and took < CANCEL_DEADLINE
    assert "terminal/kill" in methods and term.proc.poll() is not None


def test_cancel_while_a_permission_request_is_never_answered(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"tool_calls": [call("write_file", path="a.txt", content="a")]}])
    with Editor(tmp_path, fake_llm, permission=None, answer_cancelled=False) as ed:
        ed.initialize()
        sid = ed.new_session()
        prompt_id = ed.send_prompt(sid, "write")
        ed.wait_for(lambda: ed.permission_requests, what="the permission request")
        result, took = cancel_and_time(ed, sid, prompt_id)
        (card,) = check_turn(ed, sid, prompt_id).values()
        # The agent withdraws its unanswered request.
        withdrawn = [m["params"]["requestId"] for d, m in ed.transcript()
                     if d == AGENT_TO_CLIENT and m.get("method") == "$/cancel_request"]
        fake_llm.script([{"text": "fine"}])
        assert ed.prompt(sid, "next")["stopReason"] == "end_turn"
    assert result["stopReason"] == "cancelled" and took < CANCEL_DEADLINE
    assert final(card)["status"] == "failed" and not ed.writes
    assert withdrawn == list(ed.pending_permissions)


def test_cancel_answered_by_the_client_with_outcome_cancelled(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"tool_calls": [call("terminal", command="true")]}])
    with Editor(tmp_path, fake_llm, permission=None) as ed:  # answers `cancelled` on cancel
        ed.initialize()
        sid = ed.new_session()
        prompt_id = ed.send_prompt(sid, "run")
        ed.wait_for(lambda: ed.permission_requests, what="the permission request")
        result, took = cancel_and_time(ed, sid, prompt_id)
        check_turn(ed, sid, prompt_id)
    assert result["stopReason"] == "cancelled" and took < CANCEL_DEADLINE
    assert not ed.terminals


def test_cancel_stops_a_model_stream(tmp_path: Path, fake_llm) -> None:
    fake_llm.stall_seconds = 20
    fake_llm.script([{"text": "partial answer that", "fault": "stall", "after_chunks": 3}])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        prompt_id = ed.send_prompt(sid, "talk")
        ed.wait_for(lambda: ed.updates(sid, "agent_message_chunk"), what="the first chunk")
        result, took = cancel_and_time(ed, sid, prompt_id)
        check_turn(ed, sid, prompt_id)
        fake_llm.script([{"text": "fresh"}])
        assert ed.prompt(sid, "again")["stopReason"] == "end_turn"
    assert result["stopReason"] == "cancelled" and took < CANCEL_DEADLINE


def test_a_late_cancel_is_a_no_op(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        ed.cancel(sid)  # before any turn
        assert ed.prompt(sid, "one")["stopReason"] == "end_turn"
        ed.cancel(sid)  # after the turn
        ed.cancel("no-such-session")
        assert ed.prompt(sid, "two")["stopReason"] == "end_turn"


def test_cancel_request_answers_the_in_flight_request_with_32800(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"tool_calls": [call("write_file", path="a.txt", content="a")]}])
    with Editor(tmp_path, fake_llm, permission=None, answer_cancelled=False) as ed:
        ed.initialize()
        sid = ed.new_session()
        prompt_id = ed.send_prompt(sid, "write")
        ed.wait_for(lambda: ed.permission_requests, what="the permission request")
        ed.notify("$/cancel_request", {"requestId": prompt_id})
        response = ed.response(prompt_id)
        (card,) = check_turn(ed, sid, prompt_id).values()
        assert final(card)["status"] == "failed"
        ed.notify("$/cancel_request", {"requestId": 999})  # nothing in flight: ignored
        fake_llm.script([{"text": "fine"}])
        assert ed.prompt(sid, "next")["stopReason"] == "end_turn"
    assert response["error"]["code"] == -32800
    assert not ed.writes


def test_cancel_while_a_linked_file_is_read_before_the_turn_starts(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        linked = ed.project / "big.py"
        linked.write_text("x = 1\n")
        ed.hang_reads.add(str(linked))  # the editor never answers this read
        ed.initialize()
        sid = ed.new_session()
        prompt_id = ed.send_prompt(sid, "look", {"type": "resource_link", "uri": linked.as_uri(), "name": "big.py"})
        ed.wait_for(lambda: ed.reads, what="the read")
        result, took = cancel_and_time(ed, sid, prompt_id)
        check_turn(ed, sid, prompt_id)
        ed.hang_reads.clear()
        assert ed.prompt(sid, "again")["stopReason"] == "end_turn"
    assert result["stopReason"] == "cancelled" and took < CANCEL_DEADLINE
    assert len(fake_llm.requests) == 1  # the cancelled prompt never reached the model


def test_closing_a_session_mid_turn_cancels_it(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"tool_calls": [call("write_file", path="a.txt", content="a")]}])
    with Editor(tmp_path, fake_llm, permission=None, answer_cancelled=False) as ed:
        ed.initialize()
        sid = ed.new_session()
        prompt_id = ed.send_prompt(sid, "write")
        ed.wait_for(lambda: ed.permission_requests, what="the permission request")
        assert ed.request("session/close", {"sessionId": sid}) == {}
        assert ed.result(prompt_id, timeout=CANCEL_DEADLINE)["stopReason"] == "cancelled"
        check_turn(ed, sid, prompt_id)
