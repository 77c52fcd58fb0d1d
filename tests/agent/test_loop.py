"""The agent loop against the fake LLM server, through the real OpenAI SDK."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import pytest

from talaria.agent.loop import run_turn
from talaria.agent.providers.errors import AuthError, ServerError
from talaria.agent.store import Store
from tests.helpers import assert_pairs_complete, group_alive, make_session, recorded


def run(session, prompt, events=None):
    """One turn; its events go to the session's recorder (`recorded(session)`)."""
    return anyio.run(run_turn, session, prompt)


def test_multi_turn_task_with_tools(fake_llm, tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    session = make_session(fake_llm, tmp_path, store=store)
    (session.cwd / "notes.txt").write_text("alpha\nbeta\n")
    fake_llm.script([
        {"text": "Reading.", "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"text": "Writing.", "tool_calls": [
            {"name": "write_file", "arguments": {"path": "out/summary.txt", "content": "2 lines\n"}}]},
        {"text": "Done: 2 lines."},
    ])
    events = recorded(session)
    assert run(session, "Summarise notes.txt", events) == "end_turn"
    assert (session.cwd / "out" / "summary.txt").read_text() == "2 lines\n"
    # The model saw the file through read_file's numbered lines.
    second_request = fake_llm.requests[1]["json"]["messages"]
    tool_message = next(m for m in second_request if m["role"] == "tool")
    assert "1|alpha" in tool_message["content"]
    stored = store.messages(session.id)
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert_pairs_complete(stored)
    finished = events.of("ToolCallFinished")
    assert [f.status for f in finished] == ["completed", "completed"]
    assert finished[1].content[0]["type"] == "diff" and finished[1].content[0]["old_text"] is None
    assert events.of("TitleUpdated")[0].title == "Summarise notes.txt"
    assert events.of("UsageUpdated")[-1].size == session.context_window


def test_parallel_reads_keep_model_order(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    for name in "abc":
        (session.cwd / f"{name}.txt").write_text(name * 3)
    fake_llm.script([
        {"tool_calls": [{"name": "read_file", "arguments": {"path": f"{n}.txt"}} for n in "cab"]},
        {"text": "ok"},
    ])
    assert run(session, "read") == "end_turn"
    results = [m for m in session.messages if m["role"] == "tool"]
    assert [json.loads(m["content"])["content"] for m in results] == ["1|ccc", "1|aaa", "1|bbb"]


def test_bad_tool_calls_become_results(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    fake_llm.script([
        {"tool_calls": [
            {"name": "no_such_tool", "arguments": {}},
            {"name": "read_file", "arguments": "{not json"},
            {"name": "read_file", "arguments": {}},
        ]},
        {"text": "sorry"},
    ])
    assert run(session, "go") == "end_turn"
    errors = [json.loads(m["content"])["error"] for m in session.messages if m["role"] == "tool"]
    assert "Unknown tool" in errors[0] and "Invalid JSON" in errors[1] and "Missing argument" in errors[2]


def test_max_turns_stops_the_loop(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path, max_turns=2)
    call = {"tool_calls": [{"name": "todo", "arguments": {}}]}
    fake_llm.script([call, call, call])
    assert run(session, "loop forever") == "max_turn_requests"
    assert_pairs_complete(session.messages)


@pytest.mark.parametrize(("finish", "reason"), [("length", "max_tokens"), ("refusal", "refusal")])
def test_finish_reasons_map_to_stop_reasons(fake_llm, tmp_path: Path, finish: str, reason: str) -> None:
    session = make_session(fake_llm, tmp_path)
    fake_llm.script([{"text": "partial", "finish": finish}])
    assert run(session, "go") == reason


def test_provider_failure_keeps_the_user_message(fake_llm, tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    session = make_session(fake_llm, tmp_path, store=store)
    fake_llm.script([{"fault": {"status": 500}}] * 4)
    with pytest.raises(ServerError):
        run(session, "please keep me")
    assert store.messages(session.id)[-1] == {"role": "user", "content": "please keep me"}
    fake_llm.script([{"fault": {"status": 401}}])
    with pytest.raises(AuthError) as info:
        run(session, "again")
    assert "talaria setup" in info.value.user_message() or "API key" in info.value.user_message()


def test_retry_discards_partial_output_and_tells_the_user(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    fake_llm.script([{"text": "half an answ", "fault": "disconnect", "after_chunks": 3},
                     {"text": "the whole answer"}])
    events = recorded(session)
    assert run(session, "go", events) == "end_turn"
    assert session.messages[-1]["content"] == "the whole answer"
    assert events.of("Notice"), "the retry is announced"


def test_cancel_during_a_command_kills_it_and_keeps_pairs(fake_llm, tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    session = make_session(fake_llm, tmp_path, store=store)
    fake_llm.script([
        {"tool_calls": [
            {"name": "terminal", "arguments": {"command": "echo $$ > pid.txt; sleep 30; echo never"}},
            {"name": "read_file", "arguments": {"path": "pid.txt"}},
        ]},
    ])
    pid_file = session.cwd / "pid.txt"
    events = recorded(session)

    async def main() -> tuple[str, float]:
        async with anyio.create_task_group() as tg:
            result: list[str] = []

            async def turn() -> None:
                result.append(await run_turn(session, "run it"))

            tg.start_soon(turn)
            with anyio.fail_after(10):
                while not pid_file.exists() or not pid_file.read_text().strip():
                    await anyio.sleep(0.02)
            started = time.monotonic()
            assert session.cancel()
        return result[0], time.monotonic() - started

    reason, took = anyio.run(main)
    assert reason == "cancelled"
    # Not a speed check (those are benchmarks): the command sleeps 30 s, so a turn that
    # ended well before then did not wait for it (1 s failed on a loaded machine).
    assert took < 15
    pgid = int(pid_file.read_text())
    time.sleep(0.2)
    assert not group_alive(pgid)
    assert_pairs_complete(store.messages(session.id))
    finished = events.of("ToolCallFinished")
    assert {f.id for f in finished} == {s.id for s in events.of("ToolCallStarted")}
    assert all(f.status == "failed" for f in finished)
    assert not session.cancel(), "a late cancel is a no-op"
    fake_llm.script([{"text": "fresh turn"}])
    assert run(session, "next") == "end_turn"


def test_reasoning_is_streamed_and_kept(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    fake_llm.script([{"reasoning": "think first", "text": "answer"}])
    events = recorded(session)
    assert run(session, "q", events) == "end_turn"
    assert "".join(e.text for e in events.of("ThoughtChunk")) == "think first"
    assert session.messages[-1]["reasoning"] == "think first"


def test_anthropic_thinking_round_trips(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path, model="anthropic:claude-test")
    (session.cwd / "a.txt").write_text("x")
    fake_llm.script([
        {"reasoning": "plan", "signature": "sig-1",
         "tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"text": "done"},
    ])
    assert run(session, "q") == "end_turn"
    second = fake_llm.requests[1]["json"]["messages"]
    assistant = next(m for m in second if m["role"] == "assistant")
    assert assistant["content"][0] == {"type": "thinking", "thinking": "plan", "signature": "sig-1"}


def test_images_left_out_for_models_without_vision(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path, model="openai:gpt-3.5-turbo")
    assert not session.supports_images
    fake_llm.script([{"text": "ok"}])
    events = recorded(session)
    image = {"type": "image", "mime_type": "image/png", "data": "iVBORw0KGgo="}
    assert run(session, [{"type": "text", "text": "look"}, image], events) == "end_turn"
    sent = json.dumps(fake_llm.requests[-1]["json"]["messages"])
    assert "image_url" not in sent and "cannot see images" in sent
    assert "does not take images" in events.of("Notice")[0].text
    vision = make_session(fake_llm, tmp_path, model="openai:gpt-4.1")
    fake_llm.script([{"text": "ok"}])
    run(vision, [{"type": "text", "text": "look"}, image])
    assert "image_url" in json.dumps(fake_llm.requests[-1]["json"]["messages"])
