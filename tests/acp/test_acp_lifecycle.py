"""`talaria acp` end to end: initialize, authentication, session/new, modes and config options.

Each test spawns the real server (see tests/acp_harness.py); every line is schema-checked.
"""

from __future__ import annotations

from pathlib import Path

from tests.acp_harness import Editor

COMMANDS = {"compact", "model", "mode", "context", "clear", "skills", "steer", "queue", "undo",
            "checkpoints", "restore", "mcp"}


def test_initialize_answers_v1_with_capabilities_info_and_auth_methods_the_client_can_use(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        result = ed.initialize(version=2)  # a newer client: we still speak 1
        terminal = ed.request("initialize", {"protocolVersion": 1, "clientCapabilities": {
            "fs": {}, "auth": {"terminal": True}}})["authMethods"]
    assert result["protocolVersion"] == 1
    caps = result["agentCapabilities"]
    assert caps["loadSession"] is True
    assert caps["promptCapabilities"]["image"] is True
    assert caps["promptCapabilities"]["embeddedContext"] is True
    assert set(caps["sessionCapabilities"]) >= {"list", "resume", "close"}
    assert result["agentInfo"]["name"] == "talaria" and result["agentInfo"]["version"]
    assert result["_meta"]["talaria"]["sandbox"] in ("bubblewrap", "landlock", "rlimits")
    (method,) = result["authMethods"]  # no auth.terminal: no terminal method (the schema's MUST)
    assert method["id"] == "environment" and "type" not in method  # an agent method
    assert "TALARIA_MODEL" in method["description"]
    assert [(m["id"], m.get("type")) for m in terminal] == [("setup", "terminal"), ("environment", None)]
    assert terminal[0]["args"] == ["setup"]


def test_without_credentials_initialize_works_but_session_new_says_how_to_configure(tmp_path: Path) -> None:
    with Editor(tmp_path, None, credentials=False) as ed:
        assert ed.initialize()["protocolVersion"] == 1
        err = ed.error("session/new", {"cwd": str(ed.project), "mcpServers": []})
        assert err.code == -32000
        assert "TALARIA_MODEL" in err.data and "talaria setup" in err.data
        for method in ("environment", "setup"):
            err = ed.error("authenticate", {"methodId": method})
            assert err.code == -32000 and "talaria setup" in err.data


def test_authenticate_succeeds_when_a_model_is_configured(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        assert ed.request("authenticate", {"methodId": "environment"}) == {}
        assert ed.new_session()


def test_session_new_returns_modes_and_config_options_then_advertises_commands(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        request_id = ed.send("session/new", {"cwd": str(ed.project), "mcpServers": []})
        result = ed.result(request_id)
        sid = result["sessionId"]
        ed.wait_for(lambda: ed.updates(sid, "available_commands_update"), what="commands")
        transcript = ed.transcript()
    assert result["modes"]["currentModeId"] == "default"
    assert [m["id"] for m in result["modes"]["availableModes"]] == ["default", "accept_edits", "plan", "auto", "dont_ask"]
    options = {o["id"]: o for o in result["configOptions"]}
    assert options["mode"]["currentValue"] == "default"
    assert options["model"]["category"] == "model" and options["model"]["currentValue"] == "openai:fake"
    assert options["reasoning_effort"]["category"] == "thought_level"
    # The commands come after the response, never before it (clients drop unknown sessions).
    answered = next(i for i, (_, m) in enumerate(transcript) if m.get("id") == request_id and "result" in m)
    advertised = next(i for i, (_, m) in enumerate(transcript)
                      if m.get("method") == "session/update"
                      and m["params"]["update"]["sessionUpdate"] == "available_commands_update")
    assert answered < advertised
    (update,) = [m["params"]["update"] for _, m in transcript[advertised:advertised + 1]]
    assert {c["name"] for c in update["availableCommands"]} == COMMANDS


def test_set_mode_and_set_config_option_stay_in_sync(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        assert ed.request("session/set_mode", {"sessionId": sid, "modeId": "plan"}) == {}
        ed.sync()
        assert ed.updates(sid, "current_mode_update")[-1]["currentModeId"] == "plan"
        options = {o["id"]: o for o in ed.updates(sid, "config_option_update")[-1]["configOptions"]}
        assert options["mode"]["currentValue"] == "plan"

        result = ed.request("session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "accept_edits"})
        assert {o["id"]: o for o in result["configOptions"]}["mode"]["currentValue"] == "accept_edits"
        ed.sync()
        assert ed.updates(sid, "current_mode_update")[-1]["currentModeId"] == "accept_edits"

        result = ed.request("session/set_config_option", {"sessionId": sid, "configId": "reasoning_effort", "value": "high"})
        assert {o["id"]: o for o in result["configOptions"]}["reasoning_effort"]["currentValue"] == "high"
        result = ed.request("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "openai:other"})
        assert {o["id"]: o for o in result["configOptions"]}["model"]["currentValue"] == "openai:other"

        assert ed.error("session/set_mode", {"sessionId": sid, "modeId": "yolo"}).code == -32602
        for bad_model in ("openai:", "nosuchprovider:x"):
            err = ed.error("session/set_config_option", {"sessionId": sid, "configId": "model", "value": bad_model})
            assert err.code == -32602, bad_model
        err = ed.error("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "anthropic:claude-x"})
        assert err.code == -32000 and "ANTHROPIC_API_KEY" in err.data  # no key for that provider
        assert ed.error("session/set_config_option", {"sessionId": sid, "configId": "nope", "value": "x"}).code == -32602
        # The mode sticks for the next prompt: plan refuses writes without asking.
        fake_llm.script([{"tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}]}])
        assert ed.prompt(sid, "write")["stopReason"] == "end_turn"
        assert not ed.permission_requests


def test_slash_commands_answer_in_the_turn(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        # CodeCompanion puts AGENTS.md first: the typed command is the last text block.
        assert ed.prompt(sid, "# AGENTS.md\nBe nice.", "/mode plan")["stopReason"] == "end_turn"
        assert ed.updates(sid, "current_mode_update")[-1]["currentModeId"] == "plan"
        assert ed.prompt(sid, "/context")["stopReason"] == "end_turn"
        assert ed.prompt(sid, "/clear")["stopReason"] == "end_turn"
        said = "".join(u["content"]["text"] for u in ed.updates(sid, "agent_message_chunk"))
        assert "Mode set to plan" in said and "Context:" in said and "Context cleared" in said
        assert ed.error("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/mode yolo"}]}).code == -32602
        assert not fake_llm.requests  # commands never reach the model
        fake_llm.script([{"text": "A long answer. " * 50}, {"text": "Summary of the talk."}])
        ed.prompt(sid, "Tell me a story " * 50)
        before = len(ed.updates(sid, "agent_message_chunk"))
        assert ed.prompt(sid, "/compact the story")["stopReason"] == "end_turn"
        assert len(ed.updates(sid, "agent_message_chunk")) > before


def test_unknown_session_and_relative_cwd_are_clean_errors(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        for method, params in [
            ("session/prompt", {"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]}),
            ("session/set_mode", {"sessionId": "nope", "modeId": "plan"}),
            ("session/set_config_option", {"sessionId": "nope", "configId": "mode", "value": "plan"}),
            ("session/load", {"sessionId": "nope", "cwd": str(ed.project), "mcpServers": []}),
            ("session/resume", {"sessionId": "nope", "cwd": str(ed.project)}),
            ("session/close", {"sessionId": "nope"}),
        ]:
            assert ed.error(method, params).code == -32002, method
        err = ed.error("session/new", {"cwd": "project", "mcpServers": []})
        assert err.code == -32602 and "absolute" in err.data
