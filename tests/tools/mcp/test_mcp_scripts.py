"""MCP tools in execute_code scripts: none by default, the allow-listed ones when config says,
and a kernel started before a server was ready picks them up without losing its state."""

from __future__ import annotations

from pathlib import Path

import anyio

from talaria.agent.runtime import tools_ready
from tests.exec_helpers import PATIENCE_S, execute, output_json
from tests.helpers import make_session, recorded
from tests.tools.mcp.servers import stdio

SCRIPT = """\
import json
import hermes_tools
print(json.dumps([n for n in hermes_tools.TOOLS if n.startswith("mcp")]))
"""


def session_with(fake_llm, tmp_path: Path, **config):
    session = make_session(fake_llm, tmp_path, **config)
    from talaria.tools.mcp.manager import McpManager

    manager = McpManager([stdio("demo")], cwd=session.cwd, start_timeout=PATIENCE_S,
                         call_timeout=PATIENCE_S, script_tools=config.get("mcp_script_tools", ()),
                         cache_dir=tmp_path / "mcp")
    manager.start()
    session.tool_state.sources.append(manager)
    session.tool_state.cleanups["mcp"] = manager.close
    return session


def test_scripts_get_no_mcp_tool_by_default(fake_llm, tmp_path: Path) -> None:
    session = session_with(fake_llm, tmp_path)
    try:
        anyio.run(tools_ready, session, PATIENCE_S)
        assert "mcp__demo__add" in [s.name for s in session.current_tools()]
        assert output_json(execute(session, SCRIPT)) == []
        refused = execute(session, "from hermes_tools import mcp__demo__add")
        assert "hermes_tools has no 'mcp__demo__add'" in refused["stderr"]
    finally:
        session.close()


def test_allow_listed_tools_arrive_in_a_running_kernel(fake_llm, tmp_path: Path) -> None:
    session = session_with(fake_llm, tmp_path, mcp_script_tools=("mcp__demo__add", "mcp__demo__e*"))
    try:
        first = execute(session, "state = 'kept'\n" + SCRIPT)  # may run before the server is up
        assert output_json(first) in ([], ["mcp__demo__add", "mcp__demo__echo"])
        anyio.run(tools_ready, session, PATIENCE_S)
        description = session.tool("execute_code").text()
        assert ", mcp__demo__add, mcp__demo__echo`" in description
        assert "mcp__demo__sleep" not in description
        result = execute(session, "from hermes_tools import mcp__demo__add\n"
                                  "print(state, mcp__demo__add(a=20, b=22)['content'])")
        assert result["output"] == "kept 42\n"  # same kernel, new tools
        nested = recorded(session).of("ToolCallStarted")[-1]
        assert (nested.name, nested.kind) == ("mcp__demo__add", "read")  # readOnlyHint
    finally:
        session.close()
