"""The background review through the real loop (fake model at HTTP only): counters, the
fork's whitelist at dispatch, provenance, notices, failures that stay quiet."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anyio
import pytest

from talaria.agent.loop import run_turn
from talaria.agent.skills.review import REVIEW_TOOLS, after_turn, digest
from talaria.agent.store import Store
from talaria.tools.skills.format import parse
from tests.fakellm import FakeLLM
from tests.helpers import make_session, recorded
from tests.tools.skills.helpers import skill_md

SKILL = skill_md("fix-flaky-pytest", "Fix flaky pytest tests by pinning seeds",
                 "# Steps\n1. Run pytest -p no:randomly.\n2. Pin the seed.\n")
TODO = {"name": "todo", "arguments": {"todos": [{"id": "1", "content": "fix it"}]}}


def work(calls: int = 2) -> list[dict[str, Any]]:
    """A user turn: `calls` tool calls, then an answer."""
    return [{"tool_calls": [TODO] * calls}, {"text": "Fixed."}]


def turn(session: Any, config: Any, prompt: str = "fix the flaky test") -> Any:
    async def go() -> Any:
        await run_turn(session, prompt)
        return after_turn(session, config)
    return anyio.run(go)


def config_of(session: Any, **values: Any) -> Any:
    from talaria.agent.config import load_config

    return load_config(values, env={"TALARIA_HOME": str(session.tool_state.skills.store.home)})


def test_counters_cross_the_threshold_then_restart(fake_llm: FakeLLM, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    config = config_of(session, skill_review_interval=3, memory_review_interval=2)
    fake_llm.script(work(2) + work(0))
    assert turn(session, config) is None  # 2 tool calls, 1 user turn
    review = turn(session, config)  # 2 turns: the memory review is due
    assert review is not None
    state = session.tool_state.skills
    assert state.turns_since_memory == 0 and state.tool_calls_since_write == 2 and state.reviewing
    fake_llm.script(work(1))
    assert turn(session, config) is None  # one review at a time


def test_a_skill_written_during_the_turn_restarts_the_count(fake_llm: FakeLLM, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    config = config_of(session, skill_review_interval=3)
    create = {"name": "skill_manage", "arguments": {"action": "create", "name": "fix-flaky-pytest",
                                                    "content": SKILL}}
    fake_llm.script([{"tool_calls": [TODO, TODO, create]}, {"tool_calls": [TODO]}, {"text": "ok"}])
    assert turn(session, config) is None
    assert session.tool_state.skills.tool_calls_since_write == 1


def test_off_in_config_and_per_session(fake_llm: FakeLLM, tmp_path: Path) -> None:
    from talaria.agent.options import options, set_option

    session = make_session(fake_llm, tmp_path, self_improvement=False, skill_review_interval=1)
    config = config_of(session, skill_review_interval=1)
    assert not session.tool_state.skills.review
    fake_llm.script(work(3))
    assert turn(session, config) is None
    anyio.run(set_option, session, config, "self_improvement", "on")
    assert {o.id: o.current for o in options(session, config)}["self_improvement"] == "on"
    fake_llm.script(work(1))
    assert turn(session, config) is not None
    anyio.run(set_option, session, config, "self_improvement", "off")
    assert not session.tool_state.skills.review


def test_review_saves_a_skill_with_provenance_notice_and_record(fake_llm: FakeLLM, tmp_path: Path) -> None:
    store = Store(tmp_path / "sessions.db")
    session = make_session(fake_llm, tmp_path, store=store)
    config = config_of(session, skill_review_interval=2)
    fake_llm.script(work(2) + [
        {"tool_calls": [{"name": "skill_manage", "arguments": {
            "action": "create", "name": "fix-flaky-pytest", "content": SKILL}}]},
        {"text": "Saved."},
    ])
    review = turn(session, config)
    assert review is not None
    anyio.run(review)
    folder = tmp_path / ".home/skills/fix-flaky-pytest"
    meta, _ = parse((folder / "SKILL.md").read_text(), "fix-flaky-pytest")
    assert meta["metadata"]["created_by"] == "review"
    assert meta["metadata"]["created_session"] == f"{session.id}-review"
    notices = [e.text for e in recorded(session).of("Notice")]
    assert notices == ["Saved skill `fix-flaky-pytest`"]
    # The review saw the whole conversation, and only its whitelisted tools.
    request = fake_llm.requests[2]["json"]
    assert {t["function"]["name"] for t in request["tools"]} == set(REVIEW_TOOLS)
    assert any("fix the flaky test" in str(m.get("content")) for m in request["messages"])
    assert "Background review" in str(request["messages"][-1]["content"])
    # Recorded in the transcript as a review event, out of the live context.
    rows = store.messages(session.id)
    (event,) = [r for r in rows if r.get("type") == "review"]
    assert event["changes"] == notices and event["messages"][0]["role"] == "user"
    assert all(m.get("type") != "review" for m in store.context(session.id))
    from talaria.agent.trajectories.load import load_trajectory

    trajectory = load_trajectory(store, session.id)
    (marked,) = trajectory.reviews
    assert marked["changes"] == notices and marked["at"] == len(trajectory.messages)
    assert [m["role"] for m in marked["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert trajectory.api_calls == 2  # the user's turn; the review's calls are marked apart
    assert not session.tool_state.skills.reviewing and "review" not in session.tool_state.cleanups


@pytest.mark.parametrize("call", [
    {"name": "terminal", "arguments": {"command": "touch pwned"}},
    {"name": "write_file", "arguments": {"path": "pwned", "content": "x"}},
    {"name": "execute_code", "arguments": {"code": "open('pwned', 'w')"}},
    {"name": "patch", "arguments": {"path": "a.py", "old_string": "a", "new_string": "b"}},
])
def test_the_review_cannot_call_other_tools(fake_llm: FakeLLM, tmp_path: Path, call: dict[str, Any],
                                            caplog: pytest.LogCaptureFixture) -> None:
    session = make_session(fake_llm, tmp_path)  # bypass mode: the main agent could run them
    config = config_of(session, skill_review_interval=1)
    fake_llm.script(work(1) + [{"tool_calls": [call]}, {"text": "ok"}])
    review = turn(session, config)
    with caplog.at_level(logging.WARNING):
        anyio.run(review)
    assert not (session.cwd / "pwned").exists()
    result = fake_llm.requests[3]["json"]["messages"][-1]
    assert result["role"] == "tool" and f"Refused: {call['name']} is not allowed here" in result["content"]
    assert f"refused {call['name']}" in caplog.text


def test_a_blind_patch_by_the_review_is_refused(fake_llm: FakeLLM, tmp_path: Path) -> None:
    folder = tmp_path / ".home/skills/fix-flaky-pytest"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL)
    session = make_session(fake_llm, tmp_path)
    config = config_of(session, skill_review_interval=1)
    patch = {"name": "skill_manage", "arguments": {"action": "patch", "name": "fix-flaky-pytest",
                                                   "old_string": "Pin", "new_string": "Fix"}}
    fake_llm.script(work(1) + [{"tool_calls": [patch]}, {"text": "ok"}])
    anyio.run(turn(session, config))
    assert "View it first" in fake_llm.requests[3]["json"]["messages"][-1]["content"]
    assert "Pin the seed" in (folder / "SKILL.md").read_text()
    assert recorded(session).of("Notice") == []


def test_a_failing_review_is_logged_not_shown(fake_llm: FakeLLM, tmp_path: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
    session = make_session(fake_llm, tmp_path)
    config = config_of(session, skill_review_interval=1)
    fake_llm.script(work(1) + [{"fault": {"status": 401}}])
    review = turn(session, config)
    with caplog.at_level(logging.WARNING):
        anyio.run(review)  # does not raise
    assert "background review of session" in caplog.text
    assert recorded(session).of("Notice") == []
    assert not session.tool_state.skills.reviewing


def test_digest_for_another_model_is_bounded() -> None:
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "x" * 50_000},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "1", "name": "terminal",
                                                                     "arguments": "{}"}]},
                {"role": "tool", "name": "terminal", "content": "y" * 10_000}]
    out = digest(messages)
    assert out[0]["content"] == "sys" and len(out[1]["content"]) < 2_000
    assert "tool call terminal" in out[1]["content"] and out[-1]["role"] == "assistant"


def test_review_model_gets_a_digest_not_the_replay(fake_llm: FakeLLM, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_llm.anthropic_base_url)
    session = make_session(fake_llm, tmp_path)
    config = config_of(session, skill_review_interval=1, review_model="anthropic:claude-review")
    fake_llm.script(work(1) + [{"text": "Nothing to save."}])
    review = turn(session, config)
    anyio.run(review)
    request = fake_llm.requests[2]
    assert request["path"].endswith("/messages") and request["json"]["model"] == "claude-review"
    sent = json.dumps(request["json"]["messages"])
    assert "Digest of the conversation so far" in sent and "tool call todo" in sent
    assert "tool_use" not in sent  # no replayed tool calls: a digest
    assert {t["name"] for t in request["json"]["tools"]} == set(REVIEW_TOOLS)


def test_a_recorded_model_is_not_asked_to_review(fake_llm: FakeLLM, tmp_path: Path) -> None:
    """A replay recording plays one conversation: a review on it would take the session's next
    turns. With `review_model` the review goes to that model instead."""
    import json

    recording = tmp_path / "recording.json"
    recording.write_text(json.dumps({"turns": [{"tool_calls": [TODO]}, {"text": "Fixed."}] * 3}))
    session = make_session(fake_llm, tmp_path, model=f"replay:{recording}")
    assert session.provider.name.startswith("replay:")
    assert turn(session, config_of(session, skill_review_interval=1)) is None
    assert turn(session, config_of(session, skill_review_interval=1,
                                   review_model="openai:fake-model")) is not None


def test_no_review_writes_notes_in_plan_mode(fake_llm: FakeLLM, tmp_path: Path) -> None:
    """Plan mode is read-only for the agent's own notes too: the model's memory / skill writes
    are refused, no review runs after a turn in plan mode (its counters wait), and one that
    was waiting when the session switched to plan saves nothing."""
    session = make_session(fake_llm, tmp_path, mode="plan")
    config = config_of(session, skill_review_interval=2)
    memory = {"name": "memory", "arguments": {"action": "add", "target": "memory", "content": "x"}}
    fake_llm.script([{"tool_calls": [TODO, memory]}, {"text": "Planned."}])
    assert turn(session, config) is None
    refused = json.loads(next(m for m in session.messages if m.get("name") == "memory")["content"])
    assert refused["rejected"] and "memory and skills are not written" in refused["error"]
    assert session.tool_state.skills.tool_calls_since_write == 2  # counted, for later
    session.permissions.mode = "default"
    fake_llm.script(work(1))
    review = turn(session, config)
    assert review is not None
    session.permissions.mode = "plan"  # switched before the review could start
    requests = len(fake_llm.requests)
    anyio.run(review)
    assert len(fake_llm.requests) == requests  # no model call: nothing reviewed, nothing saved
    assert not list((tmp_path / ".home/skills").glob("*/SKILL.md"))
    assert not recorded(session).of("Notice") and not session.tool_state.skills.reviewing
