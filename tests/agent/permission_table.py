"""The permission table as data: what each mode does with each effect, and every tool's calls
(each action / argument variant) with the effect it has. The README's table says the same in
words; tests/agent/test_permission_table.py checks every route against this one.

A call's outcome is read from its result, whatever the route (a direct call, an execute_code
script's call, a subagent's call): the tools' handlers are replaced by one that returns
`RAN`, and the asker answers `reject_once`, so

    ran                                   -> ALLOW
    "The user rejected this tool call."   -> ASK (the user was asked and said no)
    any other refusal                     -> REFUSE (nobody was asked)
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from talaria.agent.permissions import ALL_MODES
from talaria.tools.mcp.connection import Connection, Listing
from talaria.tools.mcp.settings import ServerSpec
from talaria.tools.mcp.specs import server_specs
from talaria.tools.registry import ToolSpec

ALLOW, ASK, REFUSE = "allow", "ask", "refuse"
RAN = {"ran": True}
ASKED = "The user rejected this tool call."


def _row(default: str, accept_edits: str, plan: str, auto: str, dont_ask: str) -> dict[str, str]:
    return dict(zip(ALL_MODES, (default, accept_edits, plan, auto, dont_ask, ALLOW), strict=True))


TABLE: dict[str, dict[str, str]] = {
    "read": _row(ALLOW, ALLOW, ALLOW, ALLOW, ALLOW),
    # Reads and searches in the project, the todo list, questions, output of processes.
    "read_outside": _row(ASK, ASK, ASK, ASK, REFUSE),
    "notes": _row(ALLOW, ALLOW, REFUSE, ALLOW, ALLOW),
    # Memory and skill writes: the agent's own files in $TALARIA_HOME.
    "edit": _row(ASK, ALLOW, REFUSE, ALLOW, REFUSE),
    # Edits in the project.
    "command": _row(ASK, ASK, REFUSE, ALLOW, REFUSE),
    # Commands, scripts, and input to a sandboxed process (auto: run in the sandbox).
    "unconfined": _row(ASK, ASK, REFUSE, ASK, REFUSE),
    # Input or a signal to a process the user allowed to run outside the sandbox.
    "asks": _row(ASK, ASK, REFUSE, ASK, REFUSE),
    # Edits outside the project, web fetches, MCP tools that do not say they only read.
}
NO_SANDBOX_TABLE = {**TABLE, "command": TABLE["unconfined"]}
"""On a machine with no sandbox tier a command nobody saw cannot be confined: auto asks."""

FREE, BOX, DONE = "{free}", "{box}", "{done}"
"""Placeholders for the live processes' ids: unconfined, sandboxed, ended."""
MCP = "mcp__demo__"

VARIANTS: dict[str, list[tuple[dict[str, Any], str]]] = {
    "read_file": [({"path": "a.txt"}, "read"), ({"path": "../outside.txt"}, "read_outside")],
    "write_file": [({"path": "new.txt", "content": "x"}, "edit"),
                   ({"path": "../outside.txt", "content": "x"}, "asks")],
    "patch": [({"path": "a.txt", "old_string": "a", "new_string": "b"}, "edit")],
    "search_files": [({"pattern": "a"}, "read"), ({"pattern": "a", "path": "sub"}, "read"),
                     ({"pattern": "a", "target": "content"}, "read"),
                     ({"pattern": "a*", "target": "files"}, "read"),
                     ({"pattern": "a", "path": "../outside.txt"}, "read_outside")],
    "terminal": [({"command": "true"}, "command"),
                 ({"command": "sleep 0", "background": True}, "command")],
    "execute_code": [({"code": "print(1)"}, "command")],
    "process": [
        ({"action": "list"}, "read"),
        *[({"action": a, "session_id": p}, "read") for a in ("poll", "log") for p in (FREE, BOX)],
        ({"action": "wait", "session_id": DONE, "timeout": 1}, "read"),
        *[(args | {"session_id": FREE}, "unconfined") for args in (
            {"action": "write", "data": "echo pwned > hello.txt"},
            {"action": "submit", "data": "echo pwned > hello.txt"},
            {"action": "close"}, {"action": "kill"})],
        *[(args | {"session_id": BOX}, "command") for args in (
            {"action": "write", "data": "x"}, {"action": "submit", "data": "echo hi > hi.txt"},
            {"action": "close"}, {"action": "kill"})],
        # Input to a process that has ended (or never was) is judged as a command.
        ({"action": "submit", "session_id": DONE, "data": "x"}, "command"),
        ({"action": "submit", "session_id": "proc_none", "data": "x"}, "command"),
    ],
    "todo": [({"todos": [{"id": "1", "content": "plan", "status": "pending"}]}, "read")],
    "session_search": [({"query": "anything"}, "read"),
                       *[({"query": "x", "sort": s, "scope": "project"}, "read")
                         for s in ("newest", "oldest")],
                       # Other projects' sessions: the store is planned as a path outside.
                       ({"query": "x", "scope": "all"}, "read_outside")],
    "delegate_task": [({"goal": "look around"}, "read")],
    # The call starts subagents; what they do is judged call by call (the subagent route).
    "clarify": [({"question": "Which one?"}, "read")],
    "skills_list": [({}, "read")],
    "skill_view": [({"name": "x"}, "read")],
    "skill_manage": [({"action": a, "name": "x", "content": "c", "old_string": "a",
                       "new_string": "b", "file_path": "references/a.md", "file_content": "c"},
                      "notes") for a in ("create", "patch", "edit", "delete", "write_file",
                                        "remove_file")],
    "memory": [({"action": a, "target": t, "content": "c", "old_text": "c"}, "notes")
               for a in ("add", "replace", "remove") for t in ("memory", "user")],
    "web_search": [({"query": "talaria"}, "asks")],
    "web_extract": [({"urls": ["https://example.com/"]}, "asks")],
    "vision_analyze": [({"image_url": "a.png", "question": "what?"}, "read"),
                       ({"image_url": "https://example.com/a.png", "question": "what?"}, "asks")],
    f"{MCP}lookup": [({"q": "x"}, "read")],
    f"{MCP}search_web": [({"q": "x"}, "asks")],
    f"{MCP}write": [({"q": "x"}, "asks")],
    f"{MCP}odd": [({"q": "x"}, "asks")],
    f"{MCP}plain": [({"q": "x"}, "asks")],
    "mcp_list_resources": [({}, "read")],
    "mcp_read_resource": [({"server": "demo", "uri": "file:///x"}, "read")],
}


def mcp_specs(tmp_path: Path) -> list[ToolSpec]:
    """A server's tools as the session gets them, one per kind of annotation: read-only,
    read-only and open-world, a plain write, read-only *and* destructive, none at all."""
    import mcp_types as types

    Hints = types.ToolAnnotations
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    tools = [types.Tool(name=name, description=name, input_schema=schema, annotations=hints)
             for name, hints in (
                 ("lookup", Hints(read_only_hint=True)),
                 ("search_web", Hints(read_only_hint=True, open_world_hint=True)),
                 ("write", Hints(read_only_hint=False, destructive_hint=False)),
                 ("odd", Hints(read_only_hint=True, destructive_hint=True)),
                 ("plain", None))]
    conn = Connection(ServerSpec("demo", "stdio"), tmp_path, 1.0, 1.0, lambda c, s: None,
                      listing=Listing(tools=tuple(tools), resources=True))

    async def call(server: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return dict(RAN)

    from talaria.tools.mcp.specs import resource_specs

    async def none(*args: Any) -> dict[str, Any]:
        return dict(RAN)

    return server_specs(conn, call) + resource_specs(none, none)


async def ran(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return dict(RAN)


def stubbed(spec: ToolSpec) -> ToolSpec:
    # The spec with a handler that only says it ran (kinds, targets, paths: all real).
    return replace(spec, handler=ran)


def outcome(result: dict[str, Any]) -> str:
    if result.get("ran") is True:
        return ALLOW
    assert result.get("rejected"), f"neither ran nor refused: {result}"
    return ASK if result["error"] == ASKED else REFUSE


def filled(args: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    # `args` with the placeholders of live processes replaced by their ids.
    text = json.dumps(args)
    for placeholder, value in ids.items():
        text = text.replace(json.dumps(placeholder), json.dumps(value))
    return dict(json.loads(text))
