"""Every tool x every action / argument variant x every mode: the decision matches the table
(tests/agent/permission_table.py), by every route a call can take: a direct call, an
execute_code script's call, a subagent's call. On every sandbox tier this machine has.

The table is generated from the registry: a tool registered without a row in `VARIANTS`, or an
enum value of its arguments (an action) no variant covers, fails `test_every_tool_and_action_
is_classified`. Live processes are real (one the user allowed unconfined, one started unseen in
the sandbox, one ended), started before the session switches to the mode under test: a mode
switch holds for what is already running.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from talaria.agent.loop import run_turn
from talaria.agent.permissions import ALL_MODES, PermissionAsk
from talaria.agent.session import Session
from talaria.agent.store import Store
from talaria.agent.tool_runner import call_nested
from talaria.tools.builtin import load_builtin_tools
from talaria.tools.execute_code.tool import EXEC_TOOLS
from talaria.tools.sandbox import tiers
from tests.agent.permission_table import (
    BOX,
    DONE,
    FREE,
    NO_SANDBOX_TABLE,
    TABLE,
    VARIANTS,
    filled,
    mcp_specs,
    outcome,
    stubbed,
)
from tests.exec_helpers import PATIENCE_S, configure
from tests.helpers import make_session

CONFINING = [t for t in ("bubblewrap", "landlock")
             if (t == "bubblewrap" and tiers._bwrap_works()) or (t == "landlock" and tiers.landlock_abi() >= 1)]
TIERS = [*CONFINING, "rlimits"]
"""Every tier this machine has; rlimits (no confinement) is always there."""


class Refuser:
    """Answers every question `reject_once`, except those about the calls it is told to allow
    (the execute_code script that carries the inner calls)."""

    def __init__(self) -> None:
        self.allow_tools: set[str] = set()
        self.asked: list[PermissionAsk] = []

    async def __call__(self, ask: PermissionAsk) -> str:
        self.asked.append(ask)
        return "allow_once" if ask.tool in self.allow_tools else "reject_once"


def test_every_tool_and_action_is_classified(tmp_path: Path) -> None:
    registry = load_builtin_tools()
    specs = [*registry.specs.values(), *mcp_specs(tmp_path)]
    assert sorted(s.name for s in specs) == sorted(VARIANTS), "a tool without a row in VARIANTS"
    for spec in specs:
        covered = [args for args, _ in VARIANTS[spec.name]]
        for name, schema in spec.parameters.get("properties", {}).items():
            for value in schema.get("enum", ()):
                assert any(a.get(name) == value for a in covered), \
                    f"{spec.name}({name}={value!r}) has no variant in the table"
        for args, effect in VARIANTS[spec.name]:
            assert spec.call_kind(args) in KINDS_OF[effect], (spec.name, args, spec.call_kind(args))


KINDS_OF = {"read": {"read", "search", "think"}, "read_outside": {"read", "search"},
            "notes": {"notes"}, "edit": {"edit"}, "command": {"execute"},
            "unconfined": {"execute"}, "asks": {"edit", "fetch", "other"}}
"""The kinds (`ToolSpec.call_kind`) each effect of the table may have."""


async def table_session(fake_llm: Any, tmp_path: Path, tier: str,
                        asker: Refuser) -> tuple[Session, dict[str, str]]:
    """A session with every tool (handlers stubbed), a project, and three live processes,
    still in bypass mode: the test switches it."""
    # With a store, as every door has: session_search(scope="all") plans it as its path.
    store = Store(tmp_path / "home" / "sessions.db")
    session = make_session(fake_llm, tmp_path, mode="bypass", asker=asker, store=store)
    session.permissions.asker = asker
    session.permissions.sandbox_tier = tier
    configure(session, tier=tier)
    (session.cwd / "a.txt").write_text("a\n")
    (session.cwd / "sub").mkdir()
    (tmp_path / "outside.txt").write_text("outside\n")
    ids = {FREE: await start(session, "cat > /dev/null"), DONE: await start(session, "true")}
    session.permissions.mode = "auto"
    asker.allow_tools = {"terminal"}  # where no sandbox holds, auto asks: the user allows it
    ids[BOX] = await start(session, "cat > /dev/null")  # unseen: in the sandbox (when one holds)
    asker.allow_tools = set()
    entries = session.tool_state.processes.entries  # type: ignore[union-attr]
    assert not entries[ids[FREE]].confined and entries[ids[BOX]].confined == (tier in CONFINING)
    with anyio.fail_after(PATIENCE_S):
        await entries[ids[DONE]].proc.ended.wait()
    registry = load_builtin_tools()
    session.tools = [stubbed(s) for s in [*registry.specs.values(), *mcp_specs(tmp_path)]]
    return session, ids


async def start(session: Session, command: str) -> str:
    started = await call_nested(session, "terminal", {"command": command, "background": True})
    assert started.get("status") == "running", started
    return str(started["session_id"])


def expected(tier: str, mode: str, tool: str, args: dict[str, Any], effect: str) -> str:
    table = TABLE if tier in CONFINING else NO_SANDBOX_TABLE
    if tier not in CONFINING and args.get("session_id") == BOX and effect == "command":
        effect = "unconfined"  # nothing could start confined here: the user saw it start
    return table[effect][mode]


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("tier", TIERS)
def test_direct_calls_match_the_table(fake_llm: Any, tmp_path: Path, tier: str, mode: str) -> None:
    async def body() -> tuple[dict[str, str], dict[str, str]]:
        session, ids = await table_session(fake_llm, tmp_path, tier, Refuser())
        try:
            session.permissions.mode = mode
            got, want = {}, {}
            for tool, variants in VARIANTS.items():
                for args, effect in variants:
                    key = f"{tool} {json.dumps(args)}"
                    got[key] = outcome(await call_nested(session, tool, filled(args, ids)))
                    want[key] = expected(tier, mode, tool, args, effect)
            return got, want
        finally:
            session.close()

    got, want = anyio.run(body)
    assert {k: v for k, v in got.items() if v != want[k]} == {}, f"wanted: {want}"


SCRIPT = """
import json
import hermes_tools
out = []
for name, args in json.loads({calls!r}):
    out.append(getattr(hermes_tools, name)(**args))
print(json.dumps(out))
"""


@pytest.mark.parametrize(("tier", "mode"), [
    (tier, mode) for tier in TIERS for mode in ALL_MODES if mode != "plan"
    # Without a sandbox dont_ask refuses even an approved script: it makes no inner calls
    # (that refusal is in the direct table's execute_code row).
    and (mode != "dont_ask" or tier in CONFINING)])
def test_execute_code_inner_calls_match_the_table(fake_llm: Any, tmp_path: Path, tier: str,
                                                  mode: str) -> None:
    """Each inner call is judged like a direct one, in the script's session and mode (the
    script itself allowed: asked and allowed, or approved before in dont_ask). Plan mode
    refuses the script; a switch to plan while it runs: test_permissions_processes.py."""
    calls = [(tool, args, effect) for tool, variants in VARIANTS.items()
             if tool in EXEC_TOOLS for args, effect in variants]

    async def body() -> dict[str, Any]:
        asker = Refuser()
        session, ids = await table_session(fake_llm, tmp_path, tier, asker)
        real = load_builtin_tools().get("execute_code")
        assert real is not None
        session.tools = [real if s.name == "execute_code" else s for s in session.tools]
        asker.allow_tools = {"execute_code"}
        try:
            code = SCRIPT.format(calls=json.dumps([[t, filled(a, ids)] for t, a, _ in calls]))
            session.permissions.mode = mode
            session.permissions.remembered[("execute", code)] = True  # dont_ask: approved before
            return await call_nested(session, "execute_code", {"code": code})
        finally:
            session.close()

    result = anyio.run(body)
    assert result.get("status") == "success", result
    inner = json.loads(result["output"])
    got = {f"{t} {json.dumps(a)}": outcome(r) for (t, a, _), r in zip(calls, inner, strict=True)}
    want = {f"{t} {json.dumps(a)}": expected(tier, mode, t, a, e) for t, a, e in calls}
    assert got == want


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("tier", TIERS)
def test_subagent_calls_match_the_table(fake_llm: Any, tmp_path: Path, tier: str, mode: str) -> None:
    """A subagent's calls are judged in the parent's mode. It has processes of its own only
    (none here), so its process input is judged as a command."""
    from talaria.agent.subagents import EXCLUDED_TOOLS

    calls = [(tool, args, "command" if args.get("session_id") and effect == "unconfined" else effect)
             for tool, variants in VARIANTS.items()
             if tool not in EXCLUDED_TOOLS and tool != "delegate_task" for args, effect in variants]

    async def body() -> list[dict[str, Any]]:
        session, ids = await table_session(fake_llm, tmp_path, tier, Refuser())
        real = load_builtin_tools().get("delegate_task")
        assert real is not None
        session.tools = [real if s.name == "delegate_task" else s for s in session.tools]
        tool_calls = [{"id": f"c{i}", "name": t, "arguments": filled(a, ids)}
                      for i, (t, a, _) in enumerate(calls)]
        fake_llm.script([
            {"tool_calls": [{"id": "d1", "name": "delegate_task", "arguments": {"goal": "all"}}]},
            {"tool_calls": tool_calls},  # the subagent's one step
            {"text": "Done."},           # the subagent's summary
            {"text": "Done."},           # the parent's answer
        ])
        try:
            session.permissions.mode = mode
            assert await run_turn(session, "go") == "end_turn"
            message = next(m for m in session.messages if m.get("name") == "delegate_task")
            return list(message["subagents"][0]["messages"])
        finally:
            session.close()

    child = anyio.run(body)
    results = {m["tool_call_id"]: json.loads(m["content"]) for m in child if m["role"] == "tool"}
    got = {f"{t} {json.dumps(a)}": outcome(results[f"c{i}"]) for i, (t, a, _) in enumerate(calls)}
    want = {f"{t} {json.dumps(a)}": expected(tier, mode, t, a, e) for t, a, e in calls}
    assert got == want
