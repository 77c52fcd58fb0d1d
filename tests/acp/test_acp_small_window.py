"""A real `talaria acp` against a model server with a small window (issue 23, item 11): the
window is learned from the refusal and reported in usage updates; when even the system prompt
and the tools do not fit, the prompt fails with the numbers and the settings, no traceback."""

from __future__ import annotations

from pathlib import Path

from tests.acp.test_acp_abuse import assert_clean_reason
from tests.acp_harness import Editor
from tests.fakewindow import prompt_tokens, small_window


def test_a_small_window_is_learned_and_reported(tmp_path: Path, fake_llm) -> None:
    small_window(fake_llm, 8192, "vllm")
    fake_llm.script([{"text": "Hello."}, {"text": "Still here."}])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        assert ed.prompt(sid, "hi")["stopReason"] == "end_turn"
        assert ed.prompt(sid, "and again")["stopReason"] == "end_turn"
        sizes = [u["size"] for u in ed.updates(sid, "usage_update")]
        said = "".join(u["content"]["text"] for u in ed.updates(sid, "agent_message_chunk"))
    assert sizes and set(sizes) == {8192}
    assert "context window is 8,192 tokens" in said and "Hello." in said and "Still here." in said
    assert len(fake_llm.requests) == 3  # one refusal, then every call fits


def test_a_window_smaller_than_the_system_prompt_fails_with_the_numbers(
        tmp_path: Path, fake_llm) -> None:
    small_window(fake_llm, 1024, "llamacpp")
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        error = ed.response(ed.send_prompt(sid, "hi"))["error"]
        said = "".join(u["content"]["text"] for u in ed.updates(sid, "agent_message_chunk"))
    assert_clean_reason(error, -32050)
    sent = prompt_tokens(fake_llm.requests[0]["json"])
    assert f"{sent:,} tokens were sent and the window is 1,024" in error["message"]
    assert "TALARIA_MODEL" in error["message"] and "context_window" in error["message"]
    assert error["data"]["cause"] == "context_overflow" and error["data"]["limit"] == 1024
    assert "Could not compact" not in said, "no compaction is tried where none can help"
    assert len(fake_llm.requests) == 1


def test_a_compaction_that_cannot_shrink_says_why(tmp_path: Path, fake_llm) -> None:
    """Before: "Could not compact the context: 2,281 -> 2,281 tokens", and no reason."""
    for compaction in (False, True):
        with Editor(tmp_path / str(compaction), fake_llm) as ed:
            caps: dict = {"session": {"compaction": {}}} if compaction else {}
            ed.request("initialize", {"protocolVersion": 1, "clientCapabilities": caps})
            sid = ed.new_session()
            assert ed.prompt(sid, "/compact")["stopReason"] == "end_turn"
            said = "".join(u["content"]["text"] for u in ed.updates(sid, "agent_message_chunk"))
            failed = [u for u in ed.updates(sid, "compaction_update") if u["status"] == "failed"]
        if compaction:
            assert "what compaction keeps whole (the system prompt" in failed[0]["error"]
        else:
            assert "Could not compact the context (" in said
            assert "what compaction keeps whole (the system prompt" in said
