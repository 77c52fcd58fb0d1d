"""MCP servers in a session's manager, against real servers (ours on the official SDK over
stdio, streamable HTTP and SSE; the reference filesystem server from npm): tools listed and
called, servers that hang, exit or crash mid-call, restarts, and no process left behind."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from talaria.tools.errors import McpError
from talaria.tools.mcp.manager import McpManager
from talaria.tools.mcp.settings import ServerSpec, parse_server
from tests.exec_helpers import PATIENCE_S, wait_for
from tests.helpers import group_alive
from tests.tools.mcp.servers import NPM_FILESYSTEM, HttpServer, project_file, stdio


def run(servers: list[ServerSpec], tmp_path: Path, body: Callable[[McpManager], Awaitable[Any]],
        **settings: Any) -> Any:
    """Start a manager for `servers`, wait for them, run `body`, close it (always)."""
    options = {"start_timeout": PATIENCE_S, "call_timeout": PATIENCE_S, "script_tools": (),
               "cache_dir": tmp_path / "cache", **settings}
    manager = McpManager(servers, cwd=tmp_path, **options)

    async def main() -> Any:
        manager.start()
        try:
            await manager.wait_ready(PATIENCE_S + 5)
            return await body(manager)
        finally:
            await manager.aclose()

    return anyio.run(main)


def spec(manager: McpManager, name: str) -> Any:
    return next(s for s in manager.specs() if s.name == name)


def test_tools_are_listed_and_called(tmp_path: Path) -> None:
    async def body(m: McpManager) -> None:
        names = [s.name for s in m.specs()]
        assert names[:3] == ["mcp__demo__add", "mcp__demo__echo", "mcp__demo__sleep"]
        assert names[-2:] == ["mcp_list_resources", "mcp_read_resource"]
        add = spec(m, "mcp__demo__add")
        assert (add.kind, add.parallel_safe, add.call_title({})) == ("read", True, "demo: add")
        assert (spec(m, "mcp__demo__echo").kind, spec(m, "mcp__demo__echo").parallel_safe) == (
            "other", False)  # no readOnlyHint: not a read
        assert add.description == "[MCP server demo] Add two integers."
        assert await add.handler({"a": 2, "b": 40}, None) == {"content": "42"}
        assert await spec(m, "mcp__demo__fail").handler({}, None) == {"error": "disk on fire"}
        picture = await spec(m, "mcp__demo__picture").handler({}, None)
        assert picture == {"content": "[image: image/png, 5 bytes, not shown]"}
        weird = await spec(m, "mcp__demo__weird").handler({"file_path": "a.txt", "mode": "fast"}, None)
        assert json.loads(weird["content"]) == {"file path": "a.txt", "mode": "fast"}  # renamed back
        big = await spec(m, "mcp__demo__big").handler({}, None)
        assert big["content"].endswith("THE END") and big["omitted_chars"] > 0
        assert Path(big["full_text_path"]).read_text().count("line ") == 4600
        listed = await spec(m, "mcp_list_resources").handler({}, None)
        assert listed["resources"] == [{"server": "demo", "uri": "note://hello", "name": "hello",
                                        "description": "A note", "mime_type": "text/plain"}]
        read = await spec(m, "mcp_read_resource").handler({"server": "demo", "uri": "note://hello"}, None)
        assert read == {"content": "hello from demo"}
        assert m.notices() == []
        assert m.status()[0]["prompts"] == ["greet"]

    run([stdio("demo")], tmp_path, body)


def test_the_server_gets_its_env_not_ours(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")

    async def body(m: McpManager) -> dict:
        return json.loads((await spec(m, "mcp__demo__whoami").handler({}, None))["content"])

    server = stdio("demo", env=[{"name": "DEMO_TOKEN", "value": "t0k"}])
    me = run([server], tmp_path, body)
    assert me["openai"] is None and me["token"] == "t0k"  # model keys stay with the agent
    assert me["marker"] and me["pgid"] == me["pid"]  # its own group, marked as ours
    assert me["cwd"] == str(tmp_path)
    # SIGKILLed when the manager closed; on a loaded machine the group takes a moment to die
    assert wait_for(lambda: not group_alive(me["pgid"]))


def test_a_server_that_hangs_at_start_is_given_up(tmp_path: Path) -> None:
    async def body(m: McpManager) -> None:
        assert [s.name for s in m.specs()][0] == "mcp__ok__add"  # the other server is unharmed
        (notice,) = m.notices()
        assert notice == ("MCP server 'slow' (editor) could not start: did not start within 10 s. "
                          "Its tools are unavailable; it will be restarted.")
        assert m.status()[1]["status"] == "failed"

    # The timeout is every server's: long enough for `ok` to start on a loaded machine.
    run([stdio("ok"), stdio("slow", "--hang")], tmp_path, body, start_timeout=10)


def test_a_server_that_exits_at_start_says_why(tmp_path: Path) -> None:
    async def body(m: McpManager) -> None:
        (notice,) = m.notices()
        assert "'broken' (config) could not start: exited with status 2 " \
               "(stderr: error: no configuration found)" in notice
        assert m.specs() == []

    run([stdio("broken", "--exit-at-start", origin="config")], tmp_path, body)


@pytest.mark.parametrize("command", ["/no/such/server", "no-such-mcp-server-anywhere", "not-executable"])
def test_a_missing_command_is_one_line_and_never_restarted(tmp_path: Path, monkeypatch, command: str) -> None:
    """Issue 28: a command that does not exist was "restarted" five times; no restart mends it."""
    from talaria.tools.mcp import manager as module

    monkeypatch.setattr(module, "BACKOFF_FIRST_S", 0.0)
    (tmp_path / "not-executable").write_text("#!/bin/sh\n")  # no x bit: cannot be run either
    path = str(tmp_path / command) if command == "not-executable" else command

    async def body(m: McpManager) -> None:
        for _ in range(10):  # every model call asks for tools: a due restart would start here
            m.specs()
            await anyio.sleep(0.05)
        (notice,) = m.notices()
        assert "'gone' (config) could not start: " in notice and "restart" not in notice, notice
        assert "install it or fix `command` in [mcp_servers.gone], then start a new session" in notice
        if command != "not-executable":
            assert f"command not found: {command}" in notice
        assert m.conns["gone"].status == "failed" and m.conns["gone"].hopeless

    run([parse_server({"name": "gone", "command": path}, origin="config")], tmp_path, body)


def test_a_crash_mid_call_fails_that_call_and_the_server_comes_back(tmp_path: Path) -> None:
    async def body(m: McpManager) -> None:
        with pytest.raises(McpError, match=r"'demo' exited with status 3 \(stderr: fatal: the crash "
                                           r"tool was called\) during the call of crash"):
            await spec(m, "mcp__demo__crash").handler({}, None)
        await wait_async(lambda: m.status()[0]["status"] == "failed")
        assert m.specs() == []  # its tools disappear
        (notice,) = m.notices()
        assert "'demo' (editor) stopped: exited with status 3" in notice
        await wait_async(lambda: any(s.name == "mcp__demo__add" for s in m.specs()))  # next use
        assert m.notices() == ["MCP server 'demo' is back (10 tools)."]
        assert await spec(m, "mcp__demo__add").handler({"a": 1, "b": 1}, None) == {"content": "2"}

    run([stdio("demo")], tmp_path, body)


def test_restarts_stop_after_the_limit(tmp_path: Path, monkeypatch) -> None:
    from talaria.tools.mcp import manager as module

    monkeypatch.setattr(module, "BACKOFF_FIRST_S", 0.0)

    async def body(m: McpManager) -> None:
        await wait_async(lambda: m.specs() == [] and m.conns["broken"].failures > module.MAX_RESTARTS)
        notices = m.notices()
        assert len(notices) == 2 and "given up after 5 restarts" in notices[1]

    run([stdio("broken", "--exit-at-start")], tmp_path, body)


def test_a_call_that_takes_too_long_times_out(tmp_path: Path) -> None:
    async def body(m: McpManager) -> None:
        with pytest.raises(McpError, match="the call of sleep timed out after 0.5 s"):
            await spec(m, "mcp__demo__sleep").handler({"seconds": 30}, None)
        assert await spec(m, "mcp__demo__add").handler({"a": 1, "b": 2}, None) == {"content": "3"}

    run([stdio("demo")], tmp_path, body, call_timeout=0.5)


def test_a_huge_schema_and_a_name_collision(tmp_path: Path) -> None:
    async def body(m: McpManager) -> None:
        huge = spec(m, "mcp__demo__huge")
        assert huge.parameters == {"type": "object", "properties": {}, "additionalProperties": True}
        assert "too large to send" in huge.description
        assert await spec(m, "mcp__demo__echo").handler({"text": "a"}, None) == {"content": "demo: a"}
        assert await spec(m, "mcp__demo_2__echo").handler({"text": "b"}, None) == {"content": "demo: b"}

    from talaria.tools.mcp.settings import combine

    servers = combine([stdio("demo", "--huge-schema"), stdio("demo")], {})
    run(servers, tmp_path, body)


def test_a_server_that_lies_about_its_schema(tmp_path: Path) -> None:
    async def body(m: McpManager) -> None:
        # The runner makes the McpError the call's result (tests/agent: invoke).
        with pytest.raises(McpError, match="^the call of liar failed: RuntimeError: Invalid "
                                           "structured content returned by tool liar: 'many' is not"):
            await spec(m, "mcp__demo__liar").handler({}, None)
        assert await spec(m, "mcp__demo__add").handler({"a": 1, "b": 1}, None) == {"content": "2"}
        assert m.status()[0]["status"] == "ready" and m.notices() == []  # nothing else broke

    run([stdio("demo", "--lie")], tmp_path, body)


@pytest.mark.parametrize("era", ["auto", "legacy"], ids=["listen-stream", "notification"])
def test_a_changed_tool_list_is_listed_again(tmp_path: Path, era: str, monkeypatch) -> None:
    from talaria.tools.mcp import connection

    monkeypatch.setattr(connection, "CONNECT_MODE", era)

    async def body(m: McpManager) -> None:
        assert await spec(m, "mcp__demo__grow").handler({}, None) == {"content": "grown"}
        await wait_async(lambda: any(s.name.startswith("mcp__demo__extra") for s in m.specs()))
        grown = next(s for s in m.specs() if s.name.startswith("mcp__demo__extra"))
        assert await grown.handler({}, None) == {"content": "{}"}  # and it can be called
        assert m.notices() == [] and m.status()[0]["status"] == "ready"

    run([stdio("demo")], tmp_path, body)


def test_allow_and_deny_lists(tmp_path: Path) -> None:
    async def body(m: McpManager) -> list[str]:
        return [s.name for s in m.specs()]

    server = stdio("demo", allow=["a*", "e*", "s*"], deny=["sleep"])
    assert run([server], tmp_path, body)[:2] == ["mcp__demo__add", "mcp__demo__echo"]
    assert "mcp__demo__sleep" not in run([server], tmp_path, body)


@pytest.mark.parametrize("sse", [False, True], ids=["streamable-http", "sse"])
def test_http_servers(tmp_path: Path, sse: bool) -> None:
    async def body(m: McpManager) -> None:
        assert await spec(m, "mcp__remote__add").handler({"a": 3, "b": 4}, None) == {"content": "7"}

    with HttpServer("remote", sse=sse) as server:
        remote = parse_server({"type": "sse" if sse else "http", "name": "remote", "url": server.url,
                               "headers": [{"name": "X-Test", "value": "1"}]}, origin="editor")
        run([remote], tmp_path, body)


@pytest.mark.skipif(not NPM_FILESYSTEM.exists(), reason="npm MCP server not installed (scripts/test installs it)")
def test_the_reference_filesystem_server_from_npm(tmp_path: Path) -> None:
    notes = project_file(tmp_path)

    async def body(m: McpManager) -> None:
        names = [s.name for s in m.specs()]
        assert "mcp__fs__read_text_file" in names and "mcp__fs__list_directory" in names, m.status()
        read = await spec(m, "mcp__fs__read_text_file").handler({"path": str(notes)}, None)
        assert read == {"content": "hello from the project\n"}
        outside = await spec(m, "mcp__fs__read_text_file").handler({"path": "/etc/hostname"}, None)
        assert "error" in outside  # the server's own sandbox answers as a tool error

    server = parse_server({"name": "fs", "command": str(NPM_FILESYSTEM), "args": [str(tmp_path)]},
                          origin="config")
    run([server], tmp_path, body)


def test_closing_kills_every_server_at_once(tmp_path: Path) -> None:
    pids: list[int] = []

    async def body(m: McpManager) -> None:
        for conn in m.conns.values():
            assert conn.stdio is not None
            pids.append(conn.stdio.pid)
        m.close()  # what Session.close does: no waiting
        assert wait_for(lambda: not any(group_alive(p) for p in pids))

    records: list[Any] = []

    async def keep(m: McpManager) -> None:
        records.extend(c.stdio.record for c in m.conns.values() if c.stdio is not None)
        await body(m)

    run([stdio("a"), stdio("b"), stdio("slow", "--hang")], tmp_path, keep, start_timeout=1)
    assert len(pids) == 3
    # Their process-group records go too, once the MCP thread has seen each end.
    assert wait_for(lambda: all(r.path is None for r in records))


async def wait_async(predicate: Callable[[], Any], seconds: float = PATIENCE_S) -> None:
    with anyio.fail_after(seconds):
        while not predicate():
            await anyio.sleep(0.02)
