"""/compact over ACP: summary call, compaction update or notice, then the compacted context is
what the model sees, while session/load in a new process still shows the whole history.
/compact runs between turns, so finished turns are compacted too (only the final answer and
any pending question stay verbatim)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.acp_harness import Editor

BIG = "".join(f"line {i}: the refund ledger entry number {i} balances to zero\n" for i in range(400))


def _initialize(ed: Editor, *, compaction: bool) -> None:
    caps = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}
    if compaction:
        caps["session"] = {"compaction": {}}
    ed.request("initialize", {"protocolVersion": 1, "clientCapabilities": caps})


def _long_session(ed: Editor, fake_llm) -> str:
    for name in ("big1.txt", "big2.txt", "big3.txt"):
        (ed.project / name).write_text(BIG)
    sid = ed.new_session()
    for i, name in enumerate(("big1.txt", "big2.txt", "big3.txt")):
        fake_llm.script([
            {"tool_calls": [{"name": "read_file", "arguments": {"path": name}}]},
            {"text": f"Read {name}."},
        ])
        assert ed.prompt(sid, f"Step {i}: read {name}; never change the ledger format.")["stopReason"] == "end_turn"
    return sid


def test_compact_with_compaction_updates_then_load_shows_everything(tmp_path: Path, fake_llm) -> None:
    env = {"TALARIA_CONTEXT_WINDOW": "30000"}
    with Editor(tmp_path, fake_llm, env=env) as ed:
        _initialize(ed, compaction=True)
        sid = _long_session(ed, fake_llm)
        fake_llm.script([{"text": "## Goal\nread the ledgers\n## Open work\n- none"}])
        before = len(fake_llm.requests)
        assert ed.prompt(sid, "/compact the ledger files")["stopReason"] == "end_turn"
        summary_request = fake_llm.requests[before]["json"]["messages"]
        assert "handoff" in summary_request[0]["content"] and "the ledger files" in summary_request[0]["content"]
        [update] = ed.updates(sid, "compaction_update")
        chunks = ed.updates(sid, "compaction_summary_chunk")  # the summary as it was written
        assert {c["compactionId"] for c in chunks} == {update["compactionId"]}
        streamed = "".join(c["content"]["text"] for c in chunks)
        assert streamed == "## Goal\nread the ledgers\n## Open work\n- none"
        assert update["status"] == "completed" and "summary" not in update  # the chunks hold it
        said = "".join(u["content"]["text"] for u in ed.updates(sid, "agent_message_chunk"))
        assert "Compacted the context from" in said
        # the summary was never counted: the figure after it is an estimate, and says so
        assert update["_meta"]["talaria"]["estimated"][1] is True and " to about " in said
        estimated = update["_meta"]["talaria"]["estimated"]

        fake_llm.script([{"text": "carrying on"}])
        ed.prompt(sid, "continue")
        sent = fake_llm.requests[-1]["json"]["messages"]
        text = str(sent)
        assert "[CONTEXT SUMMARY]" in text and "read the ledgers" in text
        # Between turns every finished turn is compacted: no full read is left, the final
        # answer and the first task stay verbatim.
        assert "balances to zero" not in text
        assert [m["content"] for m in sent if m["role"] == "assistant"] == ["Read big3.txt."]
        assert "Step 0: read big1.txt" in str(sent[1])
        assert sent[-1] == {"role": "user", "content": [{"type": "text", "text": "continue"}]}

    with Editor(tmp_path, fake_llm, env=env, home=tmp_path / "home") as ed:  # a new process
        _initialize(ed, compaction=True)
        ed.request("session/load", {"sessionId": sid, "cwd": str(ed.project), "mcpServers": []})
        users = [u["content"]["text"] for u in ed.updates(sid, "user_message_chunk")]
        assert users[:3] == [f"Step {i}: read big{i + 1}.txt; never change the ledger format." for i in range(3)]
        assert "continue" in users
        assert len(ed.updates(sid, "tool_call")) == 3, "every tool call of the history"
        assert ed.updates(sid, "compaction_update")[0]["status"] == "completed"
        assert ed.updates(sid, "compaction_update")[0]["_meta"]["talaria"]["estimated"] == estimated
        [replayed] = ed.updates(sid, "compaction_summary_chunk")  # the whole summary at once
        assert replayed["content"]["text"] == streamed


def test_a_summary_that_fails_midway_is_replaced_by_the_fallback(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm, env={"TALARIA_CONTEXT_WINDOW": "30000"}) as ed:
        _initialize(ed, compaction=True)
        sid = _long_session(ed, fake_llm)
        fake_llm.script([{"text": "## Goal\nhalf a summary", "fault": "stream_error",
                          "after_chunks": 2, "error_type": "invalid_request_error"}])
        assert ed.prompt(sid, "/compact")["stopReason"] == "end_turn"
        streamed = "".join(c["content"]["text"] for c in ed.updates(sid, "compaction_summary_chunk"))
        [update] = ed.updates(sid, "compaction_update")
    assert streamed and "## Goal\nhalf a summary".startswith(streamed)
    assert update["_meta"]["talaria"]["fallback"] is True
    assert update["summary"][0]["text"].startswith("(fallback summary")  # replaces the chunks


def test_clients_without_compaction_support_get_a_notice(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm, env={"TALARIA_CONTEXT_WINDOW": "30000"}) as ed:
        _initialize(ed, compaction=False)
        sid = _long_session(ed, fake_llm)
        fake_llm.script([{"fault": {"status": 400, "message": "summary model broke"}}])
        assert ed.prompt(sid, "/compact")["stopReason"] == "end_turn"
        assert not ed.updates(sid, "compaction_update")
        said = "".join(u["content"]["text"] for u in ed.updates(sid, "agent_message_chunk"))
        assert "Compacted the context" in said and "summary model failed" in said
        assert re.search(r"Compacted the context: (about )?[\d,]+ -> about [\d,]+ tokens", said), said


def _request_bytes(request: dict) -> int:
    body = request["json"]
    return len(json.dumps(body["messages"])) + len(json.dumps(body.get("tools") or []))


def test_compact_after_a_finished_turn_that_read_a_big_file(tmp_path: Path, fake_llm) -> None:
    """Issue 10 item 4: the finished turn is not a live one; the next request shrinks."""
    line = "0123456789 the quick brown fox jumps over the lazy dog, ledger row {i:06d}\n"
    big = "".join(line.format(i=i) for i in range(2_700))  # ~200 KB
    with Editor(tmp_path, fake_llm) as ed:  # the default (large) context window
        _initialize(ed, compaction=False)
        (ed.project / "big.txt").write_text(big)
        sid = ed.new_session()
        fake_llm.script([
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "big.txt", "limit": 2000}}]},
            {"text": "The file lists ledger rows; row 000042 is fine."},
        ])
        assert ed.prompt(sid, "Read big.txt and tell me about row 42.")["stopReason"] == "end_turn"
        last_of_turn = fake_llm.requests[-1]
        assert "ledger row 001200" in str(last_of_turn["json"]["messages"])  # the read is in it

        fake_llm.script([{"text": "## Goal\nrow 42\n## Open work\n- none"}])
        assert ed.prompt(sid, "/compact")["stopReason"] == "end_turn"
        said = "".join(u["content"]["text"] for u in ed.updates(sid, "agent_message_chunk"))
        assert "Compacted the context from" in said, said

        fake_llm.script([{"text": "row 42 is still fine"}])
        assert ed.prompt(sid, "and row 43?")["stopReason"] == "end_turn"
        following = fake_llm.requests[-1]
        sent = following["json"]["messages"]
        assert "ledger row 001200" not in str(sent)
        assert sent[1]["content"] == [{"type": "text", "text": "Read big.txt and tell me about row 42."}]
        answers = [m["content"] for m in sent if m["role"] == "assistant"]
        assert answers == ["The file lists ledger rows; row 000042 is fine."]
        assert _request_bytes(following) < _request_bytes(last_of_turn) / 4, "well under half"
