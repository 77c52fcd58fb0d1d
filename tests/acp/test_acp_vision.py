"""vision_analyze through a real `talaria acp`: the card (schema-checked), the image in the
model's next request, and `session/load` in a new process replaying the call, not the image
as a prompt the user never sent."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image

from tests.acp_harness import AGENT_TO_CLIENT, Editor

VISION = {"TALARIA_MODEL": "openai:gpt-4o"}


def test_vision_card_request_and_replay(tmp_path: Path, fake_llm) -> None:
    out = io.BytesIO()
    Image.new("RGB", (30, 20), (0, 0, 255)).save(out, "PNG")
    fake_llm.script([
        {"tool_calls": [{"id": "call_v", "name": "vision_analyze",
                         "arguments": {"image_url": "ui.png", "question": "Which colour?"}}]},
        {"text": "Blue."},
    ])
    with Editor(tmp_path, fake_llm, env=VISION) as ed:
        (ed.project / "ui.png").write_bytes(out.getvalue())
        ed.initialize()
        sid = ed.new_session()
        assert ed.prompt(sid, "Look at ui.png")["stopReason"] == "end_turn"
        cards = ed.updates(sid, "tool_call")
        assert cards[0]["kind"] == "read" and cards[0]["title"] == "Look at ui.png"
        assert cards[0]["locations"] == [{"path": str(ed.project / "ui.png")}]
        done = [u for u in ed.updates(sid, "tool_call_update") if u.get("status") == "completed"]
        assert "Showed ui.png to the model (30x20 PNG" in done[0]["content"][0]["content"]["text"]
    sent = fake_llm.requests[1]["json"]["messages"]
    assert [m["role"] for m in sent[-2:]] == ["tool", "user"]
    assert sent[-1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    with Editor(tmp_path, fake_llm, env=VISION) as ed:
        ed.initialize()
        load_id = ed.send("session/load", {"sessionId": sid, "cwd": str(ed.project), "mcpServers": []})
        ed.result(load_id)
        ed.sync()
        transcript = ed.transcript()
        answered = next(i for i, (d, m) in enumerate(transcript)
                        if m.get("id") == load_id and d == AGENT_TO_CLIENT)
        replayed = [m["params"]["update"] for d, m in transcript[:answered]
                    if m.get("method") == "session/update"]
    users = [u["content"] for u in replayed if u["sessionUpdate"] == "user_message_chunk"]
    assert users == [{"type": "text", "text": "Look at ui.png"}]
    (card,) = [u for u in replayed if u["sessionUpdate"] == "tool_call"]
    assert card["toolCallId"] == "call_v" and card["status"] == "completed"
