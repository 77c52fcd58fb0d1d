"""The newer ACP surface: `session/delete`, `logout` (stable), `session/fork` (unstable, so
checked against the unstable schema), and the plan kept current (fork, /clear)."""

from __future__ import annotations

from pathlib import Path

from tests.acp_harness import Editor


def test_initialize_advertises_delete_fork_and_logout(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        caps = ed.initialize()["agentCapabilities"]
    assert caps["sessionCapabilities"]["delete"] == {} and caps["sessionCapabilities"]["fork"] == {}
    assert caps["auth"] == {"logout": {}}


def test_delete_removes_a_session_open_or_not(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        kept, closed, open_ = ed.new_session(), ed.new_session(), ed.new_session()
        for sid in (kept, closed, open_):
            assert ed.prompt(sid, f"hello {sid[:4]}")["stopReason"] == "end_turn"
        ed.request("session/close", {"sessionId": closed})
        assert ed.request("session/delete", {"sessionId": closed}) == {}
        assert ed.request("session/delete", {"sessionId": open_}) == {}
        listed = {s["sessionId"] for s in ed.request("session/list", {})["sessions"]}
        gone = ed.error("session/load", {"sessionId": closed, "cwd": str(ed.project), "mcpServers": []})
        prompt_gone = ed.error("session/prompt", {"sessionId": open_,
                                                  "prompt": [{"type": "text", "text": "hi"}]})
        again = ed.error("session/delete", {"sessionId": closed})
    assert listed == {kept}
    assert gone.code == prompt_gone.code == again.code == -32002


def test_logout_forgets_stored_keys_so_new_sessions_need_them_again(tmp_path: Path, fake_llm) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "credentials").write_text("OPENAI_API_KEY=sk-stored\n")
    env = {"TALARIA_MODEL": "openai:fake", "OPENAI_BASE_URL": fake_llm.openai_base_url}
    with Editor(tmp_path, fake_llm, credentials=False, env=env) as ed:
        ed.initialize()
        sid = ed.new_session()
        assert ed.request("logout", {}) == {}
        refused = ed.error("session/new", {"cwd": str(ed.project), "mcpServers": []})
        still = ed.prompt(sid, "the open session goes on")
    assert not (home / "credentials").exists()
    assert refused.code == -32000
    assert still["stopReason"] == "end_turn"


def test_fork_copies_the_transcript_into_a_new_session(tmp_path: Path, fake_llm) -> None:
    todos = [{"id": "1", "content": "write the parser", "status": "in_progress"}]
    fake_llm.script([{"tool_calls": [{"name": "todo", "arguments": {"todos": todos}}]},
                     {"text": "Planned."}, {"text": "Forked answer."}, {"text": "Source answer."}])
    with Editor(tmp_path, fake_llm, unstable=True) as ed:
        ed.initialize()
        source = ed.new_session()
        assert ed.prompt(source, "remember the word PELICAN")["stopReason"] == "end_turn"
        forked = ed.request("session/fork", {"sessionId": source, "cwd": str(ed.project),
                                             "mcpServers": []})
        fork = forked["sessionId"]
        ed.sync()
        plan = ed.updates(fork, "plan")
        assert ed.prompt(fork, "what was the word?")["stopReason"] == "end_turn"
        assert ed.prompt(source, "and here?")["stopReason"] == "end_turn"
        titles = {s["sessionId"]: s["title"] for s in ed.request("session/list", {})["sessions"]}
        missing = ed.error("session/fork", {"sessionId": "nope", "cwd": str(ed.project),
                                            "mcpServers": []})
    assert fork != source and forked["modes"]["currentModeId"]
    assert plan and plan[-1]["entries"][0]["content"] == "write the parser"
    fork_request, source_request = (r["json"]["messages"] for r in fake_llm.requests[-2:])
    assert "PELICAN" in str(fork_request) and "what was the word?" in str(fork_request)
    assert "what was the word?" not in str(source_request)  # the source went on untouched
    assert titles[fork].endswith("(fork)")
    assert missing.code == -32002


def test_clear_also_clears_the_plan(tmp_path: Path, fake_llm) -> None:
    todos = [{"id": "1", "content": "step", "status": "pending"}]
    fake_llm.script([{"tool_calls": [{"name": "todo", "arguments": {"todos": todos}}]},
                     {"text": "Planned."}])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        ed.prompt(sid, "plan it")
        ed.prompt(sid, "/clear")
        plans = ed.updates(sid, "plan")
    assert plans[0]["entries"] and plans[-1]["entries"] == []
