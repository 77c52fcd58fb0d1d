"""ReplayProvider: scenarios and transcripts, exhaustion and divergence."""

from __future__ import annotations

import json

import pytest

from talaria.agent.providers import errors
from talaria.agent.providers.base import Finish, ReasoningDelta, TextDelta, ToolCallRequest, Usage
from talaria.agent.providers.factory import create_provider, has_credentials
from talaria.agent.providers.replay import ReplayProvider, split_text
from tests.fakellm import collect

TOOLS = [{"name": n, "description": n, "parameters": {"type": "object"}} for n in ("read", "ls")]
USER = {"role": "user", "content": "list then read"}
SCENARIO = {
    "turns": [
        {
            "reasoning": "Look around first.",
            "text": "Listing and reading.",
            "tool_calls": [
                {"name": "ls", "arguments": {"path": "."}},
                {"id": "mine", "name": "read", "arguments": '{"path": "a.py"}'},
            ],
            "expect": {"last_message_role": "user", "user_contains": "list"},
        },
        {"text": "All done.", "usage": {"input_tokens": 9, "output_tokens": 3}},
    ]
}


def tool_result(call_id: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "name": "x", "content": content}


def write(tmp_path, data, name="scenario.json") -> str:
    path = tmp_path / name
    if name.endswith(".jsonl"):
        path.write_text("".join(json.dumps(item) + "\n" for item in data))
    else:
        path.write_text(json.dumps(data))
    return str(path)


def test_plays_a_scenario(tmp_path):
    replay = create_provider(f"replay:{write(tmp_path, SCENARIO)}")
    assert isinstance(replay, ReplayProvider) and replay.name.startswith("replay:")
    first = collect(replay, [USER], TOOLS)
    assert "".join(e.text for e in first if isinstance(e, ReasoningDelta)) == "Look around first."
    deltas = [e.text for e in first if isinstance(e, TextDelta)]
    assert len(deltas) > 1 and "".join(deltas) == "Listing and reading."
    assert [e for e in first if isinstance(e, ToolCallRequest)] == [
        ToolCallRequest("call_1_0", "ls", '{"path": "."}'),
        ToolCallRequest("mine", "read", '{"path": "a.py"}'),
    ]
    assert isinstance(first[-2], Usage) and first[-2].output_tokens > 0  # estimated
    assert first[-1] == Finish("tool_calls")
    history = [
        USER,
        {"role": "assistant"},
        tool_result("call_1_0", "a.py"),
        tool_result("mine", "x"),
    ]
    second = collect(replay, history, TOOLS)
    assert second[-2:] == [Usage(input_tokens=9, output_tokens=3), Finish("stop")]


def test_exhaustion(tmp_path):
    replay = ReplayProvider(write(tmp_path, {"turns": [{"text": "only"}]}))
    collect(replay, [USER], TOOLS)
    with pytest.raises(errors.ReplayError, match="recording exhausted after 1 turns"):
        collect(replay, [USER], TOOLS)


def test_plays_a_transcript_and_jsonl_scenarios(tmp_path):
    thinking = [{"type": "thinking", "thinking": "hm", "signature": "s"}]
    transcript = [
        {"role": "system", "content": "sys"},
        USER,
        {
            "role": "assistant",
            "content": "",
            "thinking_blocks": thinking,
            "tool_calls": [{"id": "t1", "name": "ls", "arguments": "{}"}],
        },
        tool_result("t1", "a.py"),
        {"role": "assistant", "content": "There is a.py.", "reasoning": None, "tool_calls": None},
    ]
    replay = ReplayProvider(write(tmp_path, transcript, "session.jsonl"))
    first = collect(replay, [USER], TOOLS)
    assert first[-1] == Finish("tool_calls", {"thinking_blocks": thinking})
    assert ToolCallRequest("t1", "ls", "{}") in first
    second = collect(replay, [USER, transcript[2], tool_result("t1", "a.py")], TOOLS)
    assert "".join(e.text for e in second if isinstance(e, TextDelta)) == "There is a.py."
    jsonl = ReplayProvider(write(tmp_path, [{"text": "one"}, {"text": "two"}], "turns.jsonl"))
    assert len(jsonl.turns) == 2


@pytest.mark.parametrize(
    ("turn", "message"),
    [
        ({"tool_calls": [{"name": "rm", "arguments": {}}]}, "'rm', not offered"),
        ({"text": "x", "expect": {"last_message_role": "tool"}}, "expects a tool message last"),
        ({"text": "x", "expect": {"user_contains": "delete"}}, "lacks 'delete'"),
    ],
)
def test_divergence_on_the_first_turn(tmp_path, turn, message):
    replay = ReplayProvider(write(tmp_path, {"turns": [turn]}))
    with pytest.raises(errors.ReplayError, match=message):
        collect(replay, [USER], TOOLS)


def test_divergence_in_tool_results(tmp_path):
    turns = [
        {"tool_calls": [{"name": "ls", "arguments": {}}, {"name": "read", "arguments": {}}]},
        {"text": "ok", "expect": {"tool_result_contains": "a.py"}},
    ]
    path = write(tmp_path, {"turns": turns})
    replay = ReplayProvider(path)
    collect(replay, [USER], TOOLS)
    with pytest.raises(errors.ReplayError, match="expects 2 tool results, got 1"):
        collect(replay, [USER, {"role": "assistant"}, tool_result("call_1_1", "a.py")], TOOLS)
    replay = ReplayProvider(path)
    collect(replay, [USER], TOOLS)
    results = [tool_result("call_1_0", "b.py"), tool_result("call_1_1", "c.py")]
    with pytest.raises(errors.ReplayError, match="no tool result contains 'a.py'"):
        collect(replay, [USER, {"role": "assistant"}, *results], TOOLS)


def test_fault_turns_raise_classified_errors(tmp_path):
    turns = [{"fault": {"status": 429, "retry_after": 2}}, {"fault": "context_overflow"}]
    replay = ReplayProvider(write(tmp_path, {"turns": turns}))
    with pytest.raises(errors.RateLimitError) as caught:
        collect(replay, [USER], TOOLS)
    assert caught.value.retry_after == 2
    with pytest.raises(errors.ContextOverflowError):
        collect(replay, [USER], TOOLS)


def test_unreadable_recording(tmp_path):
    assert not has_credentials(f"replay:{tmp_path / 'missing.json'}")
    with pytest.raises(errors.ReplayError, match="cannot read recording"):
        ReplayProvider(tmp_path / "missing.json")


@pytest.mark.parametrize("text", ["", "one", "  lead and trail  ", " ".join(["w"] * 50)])
def test_split_text_round_trips(text):
    pieces = split_text(text)
    assert "".join(pieces) == text and len(pieces) <= 8
