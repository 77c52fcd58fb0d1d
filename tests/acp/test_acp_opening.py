"""`session/new` is answered before its session is built (`acp_server.opening`): the answer
says what the built session has, requests naming the session wait for it, and a build that
fails is told to the editor while the server keeps serving."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.acp_harness import AGENT_TO_CLIENT, Editor


def built_state(ed: Editor, sid: str, dirs: list[str]) -> dict[str, Any]:
    """The built session's modes and options: `session/resume` of an open session with the
    same roots answers with its state and changes nothing."""
    return ed.request("session/resume", {"sessionId": sid, "cwd": str(ed.project),
                                         "mcpServers": [], "additionalDirectories": dirs})


SETTINGS = [
    pytest.param({}, 0, id="defaults"),
    pytest.param({"TALARIA_MODE": "plan", "TALARIA_REASONING_EFFORT": "high",
                  "TALARIA_EXEC_MODE": "strict", "TALARIA_SELF_IMPROVEMENT": "false",
                  "TALARIA_FALLBACK_MODELS": "openai:other"}, 0, id="changed"),
    pytest.param({"TALARIA_MODE": "bypass"}, 0, id="bypass-is-headless-only"),
    pytest.param({"TALARIA_ENVIRONMENT": "docker"}, 0, id="docker"),
    pytest.param({"TALARIA_ENVIRONMENT": "ssh:me@box"}, 1, id="ssh-with-another-root"),
]


@pytest.mark.parametrize(("env", "extra_dirs"), SETTINGS)
def test_the_answer_says_what_the_built_session_has(tmp_path: Path, fake_llm: Any,
                                                   env: dict[str, str], extra_dirs: int) -> None:
    dirs = [tmp_path / f"extra{i}" for i in range(extra_dirs)]
    for d in dirs:
        d.mkdir()
    roots = [str(d) for d in dirs]
    with Editor(tmp_path, fake_llm, env=env) as ed:
        ed.initialize()
        answer = ed.request("session/new", {"cwd": str(ed.project), "mcpServers": [],
                                            "additionalDirectories": roots})
        sid = answer["sessionId"]
        built = built_state(ed, sid, roots)
        transcript = ed.transcript()
    asked = next(m["id"] for _, m in transcript if m.get("method") == "session/resume")
    probed = next(i for i, (d, m) in enumerate(transcript)  # its answer: after any correction
                  if d == AGENT_TO_CLIENT and m.get("id") == asked and "method" not in m)
    corrections = [m for _, m in transcript[:probed] if m.get("method") == "session/update"
                   and m["params"]["update"]["sessionUpdate"] in ("config_option_update",
                                                                  "current_mode_update")]
    assert built == {k: answer[k] for k in built}
    assert corrections == []  # nothing to correct: the answer was right
    if env.get("TALARIA_MODE") == "bypass":
        assert answer["modes"]["currentModeId"] == "default"


def test_requests_right_after_the_answer_wait_for_the_session(tmp_path: Path, fake_llm: Any) -> None:
    fake_llm.script([{"text": "Hello."}])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        # Sent at once, while the session is still being built.
        listed = ed.send("session/list", {})
        mode = ed.send("session/set_mode", {"sessionId": sid, "modeId": "plan"})
        prompt = ed.send_prompt(sid, "Hi")
        assert sid in [s["sessionId"] for s in ed.result(listed)["sessions"]]
        assert ed.result(mode) == {}
        assert ed.result(prompt)["stopReason"] == "end_turn"
        ed.check()


def test_a_session_that_cannot_be_built_is_told_and_the_server_keeps_serving(
    tmp_path: Path, fake_llm: Any,
) -> None:
    home = tmp_path / "home"
    (home / "sessions.db").mkdir(parents=True)  # the store cannot open: no session can be saved
    with Editor(tmp_path, fake_llm, home=home) as ed:
        ed.initialize()
        sid = ed.new_session()
        told = ed.wait_for(lambda: ed.updates(sid, "agent_message_chunk"), what="the notice")
        error = ed.error("session/prompt", {"sessionId": sid, "prompt": [
            {"type": "text", "text": "Hi"}]})
        again = ed.new_session()  # still serving
        assert again != sid
    assert "could not open this session" in told[0]["content"]["text"]
    assert str(home / "sessions.db") in told[0]["content"]["text"]
    assert "could not be opened" in error.message and "Traceback" not in error.message
