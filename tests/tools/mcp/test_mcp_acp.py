"""MCP servers an editor passes in `session/new`: a real `talaria acp`, our SDK server over
stdio, tools that arrive while the session already answers, cards and permission like any
tool, notices when a server dies, and no server left after close or `kill -9`."""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Any

from tests.acp_checks import check_turn, final
from tests.acp_harness import Editor
from tests.exec_helpers import tagged, wait_gone
from tests.tools.mcp.servers import acp_entry

PATIENCE = 60.0


def offered(llm: Any) -> list[str]:
    return [t["function"]["name"] for t in llm.requests[-1]["json"].get("tools", [])] if llm.requests else []


def until_offered(ed: Editor, sid: str, llm: Any, name: str) -> None:
    """Prompt (the fake model just answers) until a model call was offered `name`: MCP tools
    arrive when their server is ready, without holding the session up."""
    for _ in range(200):
        ed.prompt(sid, "hello", timeout=PATIENCE)
        if name in offered(llm):
            return
        time.sleep(0.1)
    raise AssertionError(f"{name} was never offered")


def test_editor_servers_are_tools_with_cards_and_permission(tmp_path: Path, fake_llm) -> None:
    tag = f"demo{secrets.token_hex(3)}"
    with Editor(tmp_path, fake_llm) as ed:
        caps = ed.initialize()["agentCapabilities"]
        assert caps["mcpCapabilities"] == {"http": True, "sse": True}
        sid = ed.request("session/new", {"cwd": str(ed.project), "mcpServers": [
            acp_entry(tag), acp_entry("late", "--delay", "2")]})["sessionId"]
        until_offered(ed, sid, fake_llm, f"mcp__{tag}__add")
        tools = {t["function"]["name"]: t["function"] for t in fake_llm.requests[-1]["json"]["tools"]}
        assert tools[f"mcp__{tag}__weird"]["parameters"]["properties"]["file_path"] == {
            "type": "string", "description": "a key with a space"}
        fake_llm.script([
            {"tool_calls": [{"id": "m1", "name": f"mcp__{tag}__add", "arguments": {"a": 40, "b": 2}},
                            {"id": "m2", "name": f"mcp__{tag}__echo", "arguments": {"text": "hi"}}]},
            {"text": "It is 42."},
        ])
        prompt_id = ed.send_prompt(sid, "add them")
        assert ed.result(prompt_id, PATIENCE)["stopReason"] == "end_turn"
        cards = check_turn(ed, sid, prompt_id)
        card = cards["m1"]  # add says readOnlyHint: a read, no question
        assert (card[0]["kind"], card[0]["title"]) == ("read", f"{tag}: add")
        assert card[0]["rawInput"] == {"a": 40, "b": 2}
        assert final(card)["content"] == [{"type": "content", "content": {"type": "text", "text": "42"}}]
        assert cards["m2"][0]["kind"] == "other"  # echo says nothing: it asks
        assert [p["toolCall"]["toolCallId"] for p in ed.permission_requests] == ["m2"]
        tool_message = next(m for m in fake_llm.requests[-1]["json"]["messages"] if m["role"] == "tool")
        assert json.loads(tool_message["content"]) == {"content": "42"}
        until_offered(ed, sid, fake_llm, "mcp__late__add")  # the slow one arrived later

        assert tagged(tag)
        ed.request("session/close", {"sessionId": sid})
        assert wait_gone(tag), "servers die with their session"


def test_a_server_that_crashes_gives_one_notice(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm, permission="allow_always") as ed:
        ed.initialize()
        sid = ed.request("session/new", {"cwd": str(ed.project),
                                         "mcpServers": [acp_entry("fragile")]})["sessionId"]
        until_offered(ed, sid, fake_llm, "mcp__fragile__crash")
        fake_llm.script([
            {"tool_calls": [{"id": "c1", "name": "mcp__fragile__crash", "arguments": {}}]},
            {"text": "It crashed."},
        ])
        prompt_id = ed.send_prompt(sid, "crash it")
        assert ed.result(prompt_id, PATIENCE)["stopReason"] == "end_turn"
        card = check_turn(ed, sid, prompt_id)["c1"]
        assert final(card)["status"] == "failed"
        assert "exited with status 3" in final(card)["content"][0]["content"]["text"]
        texts = "".join(u["content"]["text"] for u in ed.updates(sid, "agent_message_chunk"))
        assert texts.count("MCP server 'fragile' (editor) stopped: exited with status 3") == 1
        assert "mcp__fragile__crash" not in offered(fake_llm)  # gone from the next model call


def test_bad_mcp_servers_are_invalid_params(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        for bad, said in (([{"name": "x"}], "give `command`"), ("all", "must be an array"),
                          ([{"name": "x", "command": "c", "env": {"A": 1}}], "string value")):
            rid = ed.send_raw({"jsonrpc": "2.0", "id": f"bad-{said}", "method": "session/new",
                               "params": {"cwd": str(ed.project), "mcpServers": bad}})
            error = ed.response(rid)["error"]
            assert error["code"] == -32602 and error["data"].startswith("`mcpServers`")
            assert said in error["data"]


def test_no_server_survives_kill_9(tmp_path: Path, fake_llm) -> None:
    tag = f"orphan{secrets.token_hex(3)}"
    ed = Editor(tmp_path, fake_llm)
    try:
        ed.initialize()
        sid = ed.request("session/new", {"cwd": str(ed.project), "mcpServers": [
            acp_entry(tag), acp_entry(f"{tag}x", "--hang")]})["sessionId"]
        until_offered(ed, sid, fake_llm, f"mcp__{tag}__add")
        assert len(tagged(tag)) == 2
        ed.kill9()
        ed.close(check=True)
        assert wait_gone(tag), "the watchdog kills them after kill -9"
    finally:
        ed.close(check=False)


def test_load_and_resume_start_the_servers_they_are_given(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        ed.prompt(sid, "remember me")
    for method in ("session/load", "session/resume"):
        with Editor(tmp_path, fake_llm, home=tmp_path / "home") as ed:
            ed.initialize()
            name = "loaded" if method == "session/load" else "resumed"
            ed.request(method, {"sessionId": sid, "cwd": str(ed.project),
                                "mcpServers": [acp_entry(name)]})
            until_offered(ed, sid, fake_llm, f"mcp__{name}__echo")


def test_http_and_sse_servers_from_the_editor(tmp_path: Path, fake_llm) -> None:
    from tests.tools.mcp.servers import HttpServer

    with HttpServer("remote") as http, HttpServer("stream", sse=True) as sse, \
            Editor(tmp_path, fake_llm, permission="allow_once") as ed:
        ed.initialize()
        sid = ed.request("session/new", {"cwd": str(ed.project), "mcpServers": [
            {"type": "http", "name": "remote", "url": http.url,
             "headers": [{"name": "X-Test", "value": "1"}]},
            {"type": "sse", "name": "stream", "url": sse.url, "headers": []}]})["sessionId"]
        until_offered(ed, sid, fake_llm, "mcp__remote__echo")
        until_offered(ed, sid, fake_llm, "mcp__stream__echo")
        fake_llm.script([
            {"tool_calls": [{"id": "h1", "name": "mcp__remote__echo", "arguments": {"text": "hi"}},
                            {"id": "s1", "name": "mcp__stream__echo", "arguments": {"text": "yo"}}]},
            {"text": "Both answered."},
        ])
        prompt_id = ed.send_prompt(sid, "echo")
        assert ed.result(prompt_id, PATIENCE)["stopReason"] == "end_turn"
        cards = check_turn(ed, sid, prompt_id)
        assert final(cards["h1"])["content"][0]["content"]["text"] == "remote: hi"
        assert final(cards["s1"])["content"][0]["content"]["text"] == "stream: yo"


def test_a_fork_connects_the_editors_servers(tmp_path: Path, fake_llm) -> None:
    """`session/fork` carries `mcpServers` (ForkSessionRequest) like new/load/resume: the fork
    offers the server's tools and a call reaches the server."""
    tag = f"fork{secrets.token_hex(3)}"
    with Editor(tmp_path, fake_llm, unstable=True) as ed:
        ed.initialize()
        source = ed.new_session()
        assert ed.prompt(source, "hello")["stopReason"] == "end_turn"
        assert f"mcp__{tag}__add" not in offered(fake_llm)
        fork = ed.request("session/fork", {"sessionId": source, "cwd": str(ed.project),
                                           "mcpServers": [acp_entry(tag)]})["sessionId"]
        until_offered(ed, fork, fake_llm, f"mcp__{tag}__add")
        fake_llm.script([
            {"tool_calls": [{"id": "f1", "name": f"mcp__{tag}__add", "arguments": {"a": 2, "b": 3}}]},
            {"text": "It is 5."},
        ])
        assert ed.prompt(fork, "add them", timeout=PATIENCE)["stopReason"] == "end_turn"
        tool_message = next(m for m in fake_llm.requests[-1]["json"]["messages"] if m["role"] == "tool")
        assert json.loads(tool_message["content"]) == {"content": "5"}
        assert tagged(tag)
        ed.request("session/close", {"sessionId": fork})
        assert wait_gone(tag), "the fork's servers die with it"


def test_the_first_request_waits_for_a_server_still_starting(tmp_path: Path, fake_llm) -> None:
    """A stdio server that takes a second to start: the prompt sent right after session/new
    has its tools in its first model request, and the model's call reaches it."""
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.request("session/new", {"cwd": str(ed.project), "mcpServers": [
            acp_entry("slow", "--delay", "1")]})["sessionId"]
        fake_llm.script([
            {"tool_calls": [{"id": "s1", "name": "mcp__slow__add", "arguments": {"a": 1, "b": 2}}]},
            {"text": "It is 3."},
        ])
        assert ed.prompt(sid, "add them", timeout=PATIENCE)["stopReason"] == "end_turn"
    first, second = fake_llm.requests[-2:]
    assert "mcp__slow__add" in [t["function"]["name"] for t in first["json"]["tools"]]
    tool_message = next(m for m in second["json"]["messages"] if m["role"] == "tool")
    assert json.loads(tool_message["content"]) == {"content": "3"}
