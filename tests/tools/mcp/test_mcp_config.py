"""MCP servers from config.toml, for headless runs: `[mcp_servers.NAME]` tables, `[mcp]`
settings, tools in the first model call once `tools_ready` has waited for them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from talaria.agent.config import load_config
from talaria.agent.loop import run_turn
from talaria.agent.runtime import tools_ready
from tests.helpers import make_session, recorded
from tests.tools.mcp.servers import SERVER


def write_config(tmp_path: Path, text: str) -> None:
    home = tmp_path / ".home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(text)


def test_config_servers_start_with_the_session(fake_llm, tmp_path: Path) -> None:
    write_config(tmp_path, f"""
[mcp]
start_timeout = 60
script_tools = ["mcp__calc__add"]

[mcp_servers.calc]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(SERVER))}, "--name", "calc"]
deny = ["crash", "sleep"]
""")
    session = make_session(fake_llm, tmp_path, mode="bypass")
    try:
        fake_llm.script([
            {"tool_calls": [{"id": "a", "name": "mcp__calc__add", "arguments": {"a": 1, "b": 2}}]},
            {"text": "3"},
        ])

        async def headless() -> str:
            await tools_ready(session, 60)
            return await run_turn(session, "add")

        assert anyio.run(headless) == "end_turn"
        offered = [t["function"]["name"] for t in fake_llm.requests[0]["json"]["tools"]]
        assert "mcp__calc__add" in offered and "mcp__calc__crash" not in offered
        finished = recorded(session).of("ToolCallFinished")[-1]
        assert finished.content[0]["text"] == "3"
        assert "mcp__calc__add" in session.tool("execute_code").text()  # scripts may call it
    finally:
        session.close()


def test_config_tables_are_checked(tmp_path: Path) -> None:
    home = tmp_path
    (home / "config.toml").write_text("[web]\nsearch = \"brave\"\nkey = \"x\"\n")
    with pytest.raises(ValueError, match=r"\[web\] unknown key .key. \(known keys: allow_networks, "
                                         r"cache_ttl, endpoint, extract, search"):
        load_config(env={"TALARIA_HOME": str(home)})
    (home / "config.toml").write_text("[web]\nsearch = \"bing\"\n")
    with pytest.raises(ValueError, match="web_search must be one of searxng, brave"):
        load_config(env={"TALARIA_HOME": str(home)})
    (home / "config.toml").write_text("mcp_servers = 3\n")
    with pytest.raises(ValueError, match=r"\[mcp_servers.NAME\] must be tables"):
        load_config(env={"TALARIA_HOME": str(home)})
    (home / "config.toml").write_text("[web]\nsearch = \"exa\"\n[mcp]\ncall_timeout = 5\n")
    config = load_config(env={"TALARIA_HOME": str(home)})
    assert (config.web_search, config.mcp_call_timeout) == ("exa", 5.0)
    assert config.sources["web_search"] == "config.toml"


def test_the_mcp_command_shows_servers_and_runs_their_prompts(fake_llm, tmp_path: Path) -> None:
    from talaria.agent import commands

    write_config(tmp_path, f"""
[mcp_servers.notes]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(SERVER))}, "--name", "notes"]

[mcp_servers.broken]
command = "/no/such/server"
""")
    session = make_session(fake_llm, tmp_path, mode="bypass")
    config = load_config(env={"TALARIA_HOME": str(tmp_path / ".home")})
    try:
        fake_llm.script([{"text": "A haiku."}])

        async def use() -> str:
            await tools_ready(session, 60)
            await commands.run(session, config, "mcp", "")
            return await commands.run(session, config, "mcp", "notes greet name=Ada")

        assert anyio.run(use) == "end_turn"
        shown = recorded(session).of("TextChunk")[0].text
        assert "- notes (config, stdio): ready, 10 tools; prompts: greet" in shown
        assert "- broken (config, stdio): failed, 0 tools (command not found: /no/such/server)" in shown
        user = [m for m in fake_llm.requests[0]["json"]["messages"] if m["role"] == "user"]
        assert user[-1]["content"] == "Write a haiku greeting Ada."
        for bad, said in (("notes", "write /mcp SERVER PROMPT"), ("nobody greet", "no MCP server 'nobody'"),
                          ("notes nope", "nope")):
            with pytest.raises(commands.CommandError, match=said):
                anyio.run(commands.run, session, config, "mcp", bad)
    finally:
        session.close()


def test_talaria_config_lists_servers_and_masks_web_keys(tmp_path: Path) -> None:
    from talaria.agent.config import describe

    (tmp_path / "config.toml").write_text('[mcp_servers.gh]\nurl = "https://mcp.example/mcp"\n'
                                          '[mcp_servers.fs]\ndeny = ["write_*"]\n')
    env = {"TALARIA_HOME": str(tmp_path), "TAVILY_API_KEY": "tvly-1234567890"}
    rows = {name: (value, source) for name, value, source in describe(load_config(env=env), env)}
    assert rows["mcp_servers.gh"] == ("https://mcp.example/mcp", "config.toml")
    assert rows["mcp_servers.fs"] == ("filters the editor's server", "config.toml")
    assert rows["TAVILY_API_KEY"] == ("tvl…90", "env TAVILY_API_KEY")
