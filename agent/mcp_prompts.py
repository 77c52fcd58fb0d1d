"""`/mcp`: what a session's MCP servers are doing, and their prompts run as the user's turn.

MCP prompts are templates a server offers to the *user* (not tools for the model), so they
are reached through the slash command: `/mcp SERVER PROMPT name=value ...` fetches the
prompt's messages and sends their text as the turn's prompt.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from talaria.tools.errors import McpError

if TYPE_CHECKING:
    from talaria.agent.session import Session
    from talaria.tools.mcp.manager import McpManager


def managers(session: Session) -> list[McpManager]:
    from talaria.tools.mcp.manager import McpManager

    return [s for s in session.tool_state.sources if isinstance(s, McpManager)]


def describe_servers(session: Session) -> str:
    rows = [row for manager in managers(session) for row in manager.status()]
    if not rows:
        return ("No MCP servers in this session. Editors pass them in session/new; for headless "
                "runs add [mcp_servers.NAME] to config.toml.")
    lines = ["MCP servers:"]
    for r in rows:
        line = f"- {r['name']} ({r['origin']}, {r['transport']}): {r['status']}, {r['tools']} tools"
        if r["prompts"]:
            line += f"; prompts: {', '.join(r['prompts'])}"
        if r["error"] and r["status"] != "ready":
            line += f" ({r['error']})"
        lines.append(line)
    lines.append("Run a prompt with /mcp SERVER PROMPT name=value ...")
    return "\n".join(lines)


async def prompt_text(session: Session, arg: str) -> str:
    """The text of `SERVER PROMPT name=value ...`; ValueError says what is wrong."""
    from talaria.tools.mcp.results import block_text

    try:
        words = shlex.split(arg)
    except ValueError as exc:
        raise ValueError(f"cannot read the arguments: {exc}") from None
    if len(words) < 2 or not all("=" in w for w in words[2:]):
        raise ValueError("write /mcp SERVER PROMPT name=value ...")
    server, name = words[0], words[1]
    arguments = dict(w.split("=", 1) for w in words[2:])
    for manager in managers(session):
        if server in manager.conns:
            try:
                result = await manager.get_prompt(server, name, arguments)
            except McpError as exc:
                raise ValueError(str(exc)) from None
            text = "\n\n".join(block_text(m.content) for m in result.messages)
            if not text.strip():
                raise ValueError(f"the prompt {name!r} of {server!r} is empty")
            return text
    raise ValueError(f"no MCP server {server!r} in this session")
