"""The built-in tool set: names, specs, and the size of their definitions."""

from __future__ import annotations

import json

from talaria.tools.builtin import CORE_TOOLS, DEFAULT_TOOLS, load_builtin_tools

# Tool definitions ride along in every request: the core set near 1,800 tokens (~4 chars
# each), with skills and memory near 2,400, so a request's fixed part stays under 2,500
# (`python -m benchmarks prompt` measures it).
MAX_DEFINITION_CHARS = 7_200
MAX_DEFAULT_DEFINITION_CHARS = 9_600


def test_core_tools_registered_with_specs() -> None:
    registry = load_builtin_tools()
    specs = {s.name: s for s in registry.select(list(CORE_TOOLS))}
    assert tuple(specs) == CORE_TOOLS
    assert {n: (s.kind, s.parallel_safe, s.path_args) for n, s in specs.items()} == {
        "read_file": ("read", True, ("path",)),
        "write_file": ("edit", False, ("path",)),
        "patch": ("edit", False, ("path",)),
        "search_files": ("search", True, ("path",)),
        "terminal": ("execute", False, ("workdir",)),
        "process": ("execute", False, ()),  # per call: reads read, input is a command
        "todo": ("think", False, ()),
        "execute_code": ("execute", False, ()),
        "session_search": ("search", True, ()),
        "delegate_task": ("think", False, ()),  # asks nothing itself: its subagents' calls do
        "clarify": ("think", False, ()),
    }
    assert specs["read_file"].call_title({"path": "a.py"}) == "Read a.py"
    assert specs["terminal"].call_title({"command": "ls"}) == "Run `ls`"
    process = specs["process"]
    assert [process.call_kind({"action": a}) for a in ("list", "poll", "log", "wait")] == ["read"] * 4
    assert [process.call_kind({"action": a}) for a in ("write", "submit", "close", "kill")] == \
        ["execute"] * 4
    assert process.command({"action": "submit", "data": "rm -rf x"}) == "rm -rf x"
    assert process.call_title({"action": "submit", "session_id": "proc_1", "data": "ls -l"}) == \
        "Submit `ls -l` to proc_1"


def test_definitions_are_small() -> None:
    defs = load_builtin_tools().definitions(list(CORE_TOOLS))
    assert len(json.dumps(defs)) <= MAX_DEFINITION_CHARS
    every = load_builtin_tools().definitions(list(DEFAULT_TOOLS))
    assert len(json.dumps(every)) <= MAX_DEFAULT_DEFINITION_CHARS
    for d in defs:
        assert d["parameters"]["type"] == "object"
