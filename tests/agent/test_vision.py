"""vision_analyze in the loop, through the real OpenAI and Anthropic SDKs against the fake LLM:
the image reaches the model's next call in a well-formed request, an auxiliary vision_model
answers for a model without vision, compaction drops old images, exports and `session/load`
take the new message."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from PIL import Image

from talaria.acp_server.history import replay_updates
from talaria.agent.config import load_config
from talaria.agent.context.compaction import boundaries, compact
from talaria.agent.context.summarizer import ProviderSummarizer
from talaria.agent.loop import run_turn
from talaria.agent.options import set_option
from talaria.agent.skills.review import _turn_calls
from talaria.agent.store import Store
from talaria.agent.trajectories.export import ToolCatalog, export
from talaria.agent.trajectories.model import build
from talaria.tools.vision_analyze import NO_VISION
from tests.helpers import assert_pairs_complete, make_session, recorded


def png(size: tuple[int, int] = (24, 16)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (10, 200, 10)).save(out, "PNG")
    return out.getvalue()


def look(extra: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    calls = [{"id": "call_v", "name": "vision_analyze",
              "arguments": {"image_url": "shot.png", "question": "Which colour is it?"}}]
    return [{"tool_calls": calls + (extra or [])}, {"text": "Green."}]


def names(session: Any) -> list[str]:
    return [d["name"] for d in session.tool_definitions()]


def test_openai_gets_the_image_in_a_user_message_after_the_tool_results(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path, model="openai:gpt-4.1")
    (session.cwd / "shot.png").write_bytes(png())
    (session.cwd / "a.txt").write_text("alpha\n")
    fake_llm.script(look([{"id": "call_r", "name": "read_file", "arguments": {"path": "a.txt"}}]))
    assert anyio.run(run_turn, session, "What is in shot.png?") == "end_turn"
    sent = fake_llm.requests[1]["json"]["messages"]
    roles = [m["role"] for m in sent]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user"]
    assert [m["tool_call_id"] for m in sent[3:5]] == ["call_v", "call_r"]
    assert all(isinstance(m["content"], str) for m in sent[3:5])  # tool messages: text only
    text, image = sent[5]["content"]
    assert "Which colour is it?" in text["text"] and "shot.png" in text["text"]
    url = image["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    shown = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert shown.size == (24, 16) and shown.getpixel((0, 0)) == (10, 200, 10)
    result = json.loads(sent[3]["content"])
    assert result["attached"] is True and "_attach" not in result
    assert_pairs_complete([m for m in session.messages if not m.get("tool_image")])
    assert recorded(session).of("ToolCallFinished")[0].status == "completed"
    # The skill review counts the turn's calls across the attached image.
    assert _turn_calls(session.messages) == ["vision_analyze", "read_file"]


def test_anthropic_gets_the_image_in_the_tool_results_user_turn(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path, model="anthropic:claude-test")
    (session.cwd / "shot.png").write_bytes(png())
    (session.cwd / "a.txt").write_text("alpha\n")
    fake_llm.script(look([{"id": "call_r", "name": "read_file", "arguments": {"path": "a.txt"}}]))
    assert anyio.run(run_turn, session, "What is in shot.png?") == "end_turn"
    request = fake_llm.requests[1]
    assert request["path"].endswith("/messages")
    sent = request["json"]["messages"]
    roles = [m["role"] for m in sent]
    assert roles == ["user", "assistant", "user"]  # alternating, as the API requires
    blocks = sent[2]["content"]
    assert [b["type"] for b in blocks] == ["tool_result", "tool_result", "text", "image"]
    assert [b["tool_use_id"] for b in blocks[:2]] == ["call_v", "call_r"]
    assert blocks[3]["source"]["type"] == "base64" and blocks[3]["source"]["media_type"] == "image/png"
    assert Image.open(io.BytesIO(base64.b64decode(blocks[3]["source"]["data"]))).size == (24, 16)


def test_vision_model_answers_for_a_model_without_vision(fake_llm, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_llm.anthropic_base_url)
    session = make_session(fake_llm, tmp_path, model="openai:gpt-3.5-turbo",
                           vision_model="anthropic:claude-test-vision")
    assert not session.supports_images and "vision_analyze" in names(session)
    (session.cwd / "shot.png").write_bytes(png())
    fake_llm.script([look()[0], {"text": "A green rectangle."}, {"text": "It is green."}])
    assert anyio.run(run_turn, session, "What is in shot.png?") == "end_turn"
    asked = fake_llm.requests[1]
    assert asked["path"].endswith("/messages") and asked["json"]["model"] == "claude-test-vision"
    content = asked["json"]["messages"][0]["content"]
    assert [b["type"] for b in content] == ["text", "image"]
    assert content[0]["text"].startswith("Which colour is it?") and not asked["json"].get("tools")
    result = json.loads(next(m for m in session.messages if m["role"] == "tool")["content"])
    assert result["analysis"] == "A green rectangle." and result["model"] == "anthropic:claude-test-vision"
    final = json.dumps(fake_llm.requests[2]["json"]["messages"])
    assert "data:image" not in final and "A green rectangle." in final
    assert not [m for m in session.messages if m.get("tool_image")]


def test_a_failing_vision_model_is_the_calls_error(fake_llm, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.openai_base_url)
    session = make_session(fake_llm, tmp_path, model="openai:gpt-3.5-turbo",
                           vision_model="openai:gpt-4o-mini")
    (session.cwd / "shot.png").write_bytes(png())
    fake_llm.script([look()[0], {"fault": {"status": 401}}, {"text": "I could not see it."}])
    assert anyio.run(run_turn, session, "look") == "end_turn"
    result = json.loads(next(m for m in session.messages if m["role"] == "tool")["content"])
    assert result["error"].startswith("the vision model openai:gpt-4o-mini failed")


def test_offered_only_where_it_can_work(fake_llm, tmp_path: Path, monkeypatch) -> None:
    plain = make_session(fake_llm, tmp_path, model="openai:gpt-3.5-turbo")
    assert "vision_analyze" not in names(plain)
    assert "vision_analyze" in names(make_session(fake_llm, tmp_path, model="openai:gpt-4o"))
    # A model that stops seeing images mid-session (the user switched) gets the clear line.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.openai_base_url)
    session = make_session(fake_llm, tmp_path, model="openai:gpt-4o")
    (session.cwd / "shot.png").write_bytes(png())
    config = load_config({}, env={"TALARIA_HOME": str(tmp_path / ".home")})
    anyio.run(set_option, session, config, "model", "openai:gpt-3.5-turbo")
    assert not session.supports_images
    fake_llm.script(look())
    anyio.run(run_turn, session, "look")
    result = json.loads(next(m for m in session.messages if m["role"] == "tool")["content"])
    assert result == {"error": NO_VISION}
    assert not [m for m in session.messages if m.get("tool_image")]


def _two_turns_with_an_image(fake_llm: Any, tmp_path: Path) -> Any:
    session = make_session(fake_llm, tmp_path, model="openai:gpt-4.1")
    (session.cwd / "shot.png").write_bytes(png())
    fake_llm.script([{"text": "Hello."}, *look(), {"text": "Later."}])
    anyio.run(run_turn, session, "hi")
    anyio.run(run_turn, session, "What is in shot.png?")
    anyio.run(run_turn, session, "and now?")
    return session


def test_compaction_drops_old_images_and_keeps_the_prompt_in_the_tail(fake_llm, tmp_path: Path) -> None:
    session = _two_turns_with_an_image(fake_llm, tmp_path)
    messages = session.messages
    image_at = next(i for i, m in enumerate(messages) if m.get("tool_image"))
    prompt_at = next(i for i, m in enumerate(messages) if m.get("content") == "What is in shot.png?")
    # During a turn the tail keeps the turn's prompt, not only the image a tool attached.
    _, tail = boundaries(messages[:image_at + 1], 0)
    assert tail == prompt_at
    result = anyio.run(lambda: compact(
        messages, window=session.context_window, tools=session.tool_definitions(),
        summarizer=ProviderSummarizer(session.provider), between_turns=True))
    reduced = result.messages[image_at]
    assert [p["type"] for p in reduced["content"]] == ["text", "text"]
    assert reduced["content"][1]["text"] == "[image omitted]"
    assert "Which colour is it?" in reduced["content"][0]["text"]
    assert result.after < result.before


def test_exports_and_session_load_take_the_attached_image(fake_llm, tmp_path: Path) -> None:
    session = _two_turns_with_an_image(fake_llm, tmp_path)
    traj = build(json.loads(json.dumps(session.messages)), None, session_id=session.id)
    catalog = ToolCatalog.builtin()
    for fmt in ("sharegpt", "openai", "atif"):
        out = export([traj], fmt, catalog)
        assert out.strip()
    line = json.loads(export([traj], "openai", catalog))
    roles = [m["role"] for m in line["messages"]]
    at = roles.index("tool")
    assert roles[at + 1] == "user" and line["messages"][at + 1]["content"][1]["type"] == "image_url"
    assert "<image>" in export([traj], "sharegpt", catalog)
    # session/load shows the call's card, not a user message the user never sent.
    updates = list(replay_updates(session.messages, {s.name: s for s in session.tools}))
    users = [u for u in updates if u["sessionUpdate"] == "user_message_chunk"]
    assert [u["content"].get("text") for u in users] == ["hi", "What is in shot.png?", "and now?"]
    assert any(u.get("toolCallId") == "call_v" for u in updates)


@pytest.mark.parametrize("model", ["openai:gpt-4.1", "anthropic:claude-test"])
def test_the_turn_after_an_image_is_well_formed(fake_llm, tmp_path: Path, model: str) -> None:
    """The attached image stays in the history the next prompt is sent with."""
    session = make_session(fake_llm, tmp_path, model=model)
    (session.cwd / "shot.png").write_bytes(png())
    fake_llm.script([*look(), {"text": "next"}])
    anyio.run(run_turn, session, "look")
    anyio.run(run_turn, session, "again")
    sent = fake_llm.requests[-1]["json"]["messages"]
    if model.startswith("anthropic"):
        roles = [m["role"] for m in sent]
        assert all(a != b for a, b in zip(roles, roles[1:], strict=False))
    else:
        roles = [m["role"] for m in sent]
        assert roles[roles.index("assistant") + 1] == "tool"


def test_only_the_newest_attached_images_stay_in_the_context(fake_llm, tmp_path: Path) -> None:
    from talaria.agent.vision import MAX_LIVE_IMAGES, RETIRED

    store = Store(tmp_path / "s.db")
    session = make_session(fake_llm, tmp_path, model="openai:gpt-4.1", store=store)
    count = MAX_LIVE_IMAGES + 2
    for i in range(count):
        (session.cwd / f"s{i}.png").write_bytes(png((10 + i, 10)))
    calls = [{"id": f"c{i}", "name": "vision_analyze",
              "arguments": {"image_url": f"s{i}.png", "question": "q"}} for i in range(count)]
    fake_llm.script([{"tool_calls": calls}, {"text": "seen"}])
    assert anyio.run(run_turn, session, "look at all") == "end_turn"
    sent = fake_llm.requests[1]["json"]["messages"]
    shown = [p for m in sent if isinstance(m["content"], list) for p in m["content"]
             if p["type"] == "image_url"]
    assert len(shown) == MAX_LIVE_IMAGES
    notes = [m for m in session.messages if m.get("tool_image")]
    assert [n["content"][1] for n in notes[:2]] == [{"type": "text", "text": RETIRED}] * 2
    assert all(n["content"][1]["type"] == "image" for n in notes[2:])
    # The transcript keeps every image.
    stored = [m for m in store.messages(session.id) if m.get("tool_image")]
    assert all(m["content"][1]["type"] == "image" for m in stored) and len(stored) == count
