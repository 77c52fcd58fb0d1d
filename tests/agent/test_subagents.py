"""`delegate_task` at the agent level: real sessions, real tools, the fake LLM routing each
subagent's requests by its goal (they interleave when they run in parallel)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from talaria.agent import commands
from talaria.agent.loop import run_turn
from talaria.agent.session import Session
from talaria.agent.subagents import EXCLUDED_TOOLS, MAX_DEPTH
from talaria.tools.delegate_task import MAX_TASKS
from talaria.tools.execute_code.pool import KernelPool
from tests.exec_helpers import tagged, wait_gone
from tests.helpers import assert_pairs_complete, group_alive, make_session, recorded

GOAL = re.compile(r"^goal:(\w+)")


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def goal_of(body: dict[str, Any]) -> str | None:
    """The subagent a request comes from ("goal:NAME ..." opens its brief), or None."""
    user = next((m for m in body["messages"] if m["role"] == "user"), None)
    match = GOAL.match(str(user["content"])) if user else None
    return match.group(1) if match else None


def tools_done(body: dict[str, Any]) -> int:
    return sum(1 for m in body["messages"] if m["role"] == "tool")


def router(stories: dict[str, Callable[[int], dict[str, Any]]]) -> Callable[[dict], dict | None]:
    """`llm.respond`: each subagent's turn from its story (tool results so far -> turn)."""
    def respond(body: dict[str, Any]) -> dict[str, Any] | None:
        goal = goal_of(body)
        return stories[goal](tools_done(body)) if goal in stories else None
    return respond


def writes(name: str, count: int) -> Callable[[int], dict[str, Any]]:
    def story(done: int) -> dict[str, Any]:
        if done < count:
            return {"tool_calls": [call("write_file", path=f"{name}{done}.txt", content=name)]}
        return {"text": f"Summary of {name}: wrote {count} files."}
    return story


def delegate(*names: str, **extra: Any) -> dict[str, Any]:
    if len(names) == 1:
        return {"tool_calls": [call("delegate_task", goal=f"goal:{names[0]} do it", **extra)]}
    return {"tool_calls": [call("delegate_task", tasks=[{"goal": f"goal:{n} do it"} for n in names],
                                **extra)]}


def delegate_result(session: Session) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what the model saw, the whole tool message) of the first delegate_task call."""
    message = next(m for m in session.messages if m.get("name") == "delegate_task")
    return json.loads(message["content"]), message


def test_three_subagents_report_summaries_files_and_tool_counts(tmp_path: Path, fake_llm) -> None:
    session = make_session(fake_llm, tmp_path)
    fake_llm.respond = router({n: writes(n, 2) for n in ("a", "b", "c")})
    fake_llm.script([delegate("a", "b", "c"), {"text": "All three done."}])
    assert anyio.run(run_turn, session, "split the work") == "end_turn"
    seen, message = delegate_result(session)
    assert [r["status"] for r in seen["results"]] == ["completed"] * 3
    first = seen["results"][0]
    assert first["summary"] == "Summary of a: wrote 2 files."
    assert first["files_touched"] == ["a0.txt", "a1.txt"] and first["tool_calls"] == {"write_file": 2}
    assert first["model_calls"] == 3
    assert sorted(p.name for p in session.cwd.iterdir()) == [f"{n}{i}.txt" for n in "abc" for i in (0, 1)]
    # The transcripts are in the trajectory, never in what the model sees.
    assert "messages" not in message["content"] and "_subagents" not in message["content"]
    runs = message["subagents"]
    assert [r["task"] for r in runs] == [1, 2, 3]
    for run in runs:
        assert run["messages"][0]["role"] == "system"
        assert_pairs_complete(run["messages"])
    events = recorded(session)
    cards = [e for e in events.of("ToolCallStarted") if e.name == "subagent"]
    assert [c.title.split(":")[0] for c in cards] == ["Subagent 1", "Subagent 2", "Subagent 3"]
    assert {c.kind for c in cards} == {"think"}
    finished = {e.id: e for e in events.of("ToolCallFinished")}
    for card in cards:
        assert finished[card.id].status == "completed"
        progress, summary = finished[card.id].content
        assert progress["text"].count("✓ Write") == 2 and summary["text"].startswith("Summary of")
    states = [(e.card, e.state) for e in events.of("SubagentChanged")]
    assert sorted(states) == sorted([(c.id, s) for c in cards for s in ("running", "idle")])
    assert not events.of("PlanUpdated")


def test_subagents_run_at_most_subagent_concurrency_at_once(tmp_path: Path, fake_llm) -> None:
    session = make_session(fake_llm, tmp_path, subagent_concurrency=1)
    fake_llm.respond = router({n: writes(n, 1) for n in ("a", "b")})
    fake_llm.script([delegate("a", "b"), {"text": "ok"}])
    anyio.run(run_turn, session, "go")
    order = [(type(e).__name__, e.id) for e in recorded(session).events
             if type(e).__name__ in ("ToolCallUpdated", "ToolCallFinished") and "-sub" in e.id
             and (type(e).__name__ == "ToolCallFinished" or e.status == "in_progress")]
    assert [kind for kind, _ in order] == ["ToolCallUpdated", "ToolCallFinished"] * 2


def test_subagents_get_a_restricted_toolset_and_stop_at_the_depth_limit(tmp_path: Path,
                                                                        fake_llm) -> None:
    session = make_session(fake_llm, tmp_path)
    tools_seen: dict[str, list[str]] = {}

    def respond(body: dict[str, Any]) -> dict[str, Any] | None:
        goal = goal_of(body)
        if goal is None:
            return None
        tools_seen.setdefault(goal, [t["function"]["name"] for t in body["tools"]])
        if goal == "outer" and not tools_done(body):
            return delegate("inner")
        return {"text": f"{goal} done"}

    fake_llm.respond = respond
    fake_llm.script([delegate("outer"), {"text": "ok"}])
    assert anyio.run(run_turn, session, "go") == "end_turn"
    assert MAX_DEPTH == 2
    assert "delegate_task" in tools_seen["outer"] and "delegate_task" not in tools_seen["inner"]
    for names in tools_seen.values():
        assert not set(names) & EXCLUDED_TOOLS and "read_file" in names
    inner_cards = [e for e in recorded(session).of("ToolCallStarted") if e.title.startswith("Subagent 1: goal:inner")]
    assert len(inner_cards) == 1  # the subagent's own subagent is a card of its own


def test_toolsets_narrow_a_subagent_and_unknown_ones_are_refused(tmp_path: Path, fake_llm) -> None:
    session = make_session(fake_llm, tmp_path)
    seen: list[list[str]] = []

    def respond(body: dict[str, Any]) -> dict[str, Any] | None:
        if goal_of(body) is None:
            return None
        seen.append([t["function"]["name"] for t in body["tools"]])
        return {"text": "read only"}

    fake_llm.respond = respond
    fake_llm.script([delegate("a", toolsets=["read_file", "search_files"]),
                     delegate("b", toolsets=["clarify"]), delegate("c", toolsets=["nope"]),
                     {"text": "ok"}])
    anyio.run(run_turn, session, "go")
    assert seen == [["read_file", "search_files"]]  # b and c never started
    errors = [json.loads(m["content"]).get("error") for m in session.messages
              if m.get("name") == "delegate_task"]
    assert errors[0] is None
    assert "unknown toolset 'clarify' (subagents may not use it)" in errors[1]
    assert "unknown toolset 'nope'" in errors[2]


@pytest.mark.parametrize(("args", "error"), [
    ({}, "give a goal"),
    ({"tasks": []}, "non-empty list"),
    ({"tasks": [{"goal": f"g{i}"} for i in range(MAX_TASKS + 1)]}, f"at most {MAX_TASKS} tasks"),
    ({"tasks": [{"context": "no goal"}]}, "task 1 needs a goal"),
])
def test_bad_delegations_are_errors_that_start_nothing(tmp_path: Path, fake_llm, args, error) -> None:
    session = make_session(fake_llm, tmp_path)
    fake_llm.script([{"tool_calls": [call("delegate_task", **args)]}, {"text": "ok"}])
    anyio.run(run_turn, session, "go")
    (message,) = [m for m in session.messages if m.get("name") == "delegate_task"]
    assert error in json.loads(message["content"])["error"]
    assert fake_llm.served == 2 and "subagents" not in message


def test_a_subagent_over_its_budget_says_so_and_the_parent_goes_on(tmp_path: Path, fake_llm) -> None:
    session = make_session(fake_llm, tmp_path, subagent_max_turns=2)
    fake_llm.respond = router({"a": writes("a", 10), "b": writes("b", 1)})
    fake_llm.script([delegate("a", "b"), {"text": "Parent finished."}])
    assert anyio.run(run_turn, session, "go") == "end_turn"
    seen, _ = delegate_result(session)
    over, fine = seen["results"]
    assert over["status"] == "budget_exceeded" and over["model_calls"] == 2
    assert "budget of 2 model calls" in over["error"] and fine["status"] == "completed"


def test_a_subagents_model_failure_is_its_result_not_the_parents(tmp_path: Path, fake_llm) -> None:
    session = make_session(fake_llm, tmp_path)
    fake_llm.respond = router({"a": lambda done: {"fault": {"status": 400, "message": "bad model"}},
                               "b": writes("b", 0)})
    fake_llm.script([delegate("a", "b"), {"text": "ok"}])
    assert anyio.run(run_turn, session, "go") == "end_turn"
    seen, _ = delegate_result(session)
    assert seen["results"][0]["status"] == "failed" and "the model failed" in seen["results"][0]["error"]
    assert seen["results"][1]["status"] == "completed"


def test_permission_questions_carry_the_subagents_name_on_its_card(tmp_path: Path, fake_llm) -> None:
    asked: list[Any] = []

    async def asker(ask: Any) -> str:
        asked.append(ask)
        return "allow_once"

    session = make_session(fake_llm, tmp_path, mode="default", asker=asker)
    fake_llm.respond = router({"a": writes("a", 1)})
    fake_llm.script([delegate("a"), {"text": "ok"}])
    anyio.run(run_turn, session, "go")
    (ask,) = asked
    card = next(e for e in recorded(session).of("ToolCallStarted") if e.name == "subagent")
    assert ask.tool_call_id == card.id and ask.title == "Subagent 1: Write a0.txt"
    assert ask.diff is not None and (session.cwd / "a0.txt").read_text() == "a"


def test_a_subagent_todo_list_does_not_replace_the_users_plan(tmp_path: Path, fake_llm) -> None:
    session = make_session(fake_llm, tmp_path)
    todos = [{"id": "1", "content": "child step", "status": "pending"}]
    fake_llm.respond = router({"a": lambda d: {"tool_calls": [call("todo", todos=todos)]} if not d
                               else {"text": "done"}})
    fake_llm.script([delegate("a"), {"text": "ok"}])
    anyio.run(run_turn, session, "go")
    assert not recorded(session).of("PlanUpdated") and session.tool_state.todos == []


def test_subagent_edits_belong_to_the_parents_turn_checkpoint(tmp_path: Path, fake_llm) -> None:
    session = make_session(fake_llm, tmp_path)
    fake_llm.respond = router({n: writes(n, 1) for n in ("a", "b")})
    fake_llm.script([delegate("a", "b"), {"text": "ok"}])
    anyio.run(run_turn, session, "go")
    listing = anyio.run(commands._dispatch, session, None, "checkpoints", "")
    assert listing.count(", turn") == 1 and "2 file(s): a0.txt, b0.txt" in listing
    anyio.run(commands._dispatch, session, None, "undo", "")
    assert list(session.cwd.iterdir()) == []


def test_each_subagent_has_its_own_kernel_outside_the_cap_that_dies_with_it(tmp_path: Path,
                                                                           fake_llm) -> None:
    session = make_session(fake_llm, tmp_path)
    session.tool_state.kernels = KernelPool(max_live=1)  # the parent's cap: one kernel
    # Which kernel ran it (its tag, from its own command line) and how many scripts it ran.
    script = ("import re; calls = globals().get('calls', 0) + 1; print(calls, re.search("
              "rb'talaria-kernel-[0-9a-f]+', open('/proc/self/cmdline', 'rb').read()).group()"
              ".decode())")
    fake_llm.respond = router({"a": lambda d: {"tool_calls": [call("execute_code", code=script)]}
                               if not d else {"text": "done"}})
    fake_llm.script([{"tool_calls": [call("execute_code", code=script)]}, delegate("a"),
                     {"tool_calls": [call("execute_code", code=script)]}, {"text": "ok"}])
    anyio.run(run_turn, session, "go")
    parent = [json.loads(m["content"])["output"].split() for m in session.messages
              if m.get("name") == "execute_code"]
    assert parent[0] == ["1", parent[0][1]] and parent[1] == ["2", parent[0][1]]  # not evicted
    _, message = delegate_result(session)
    child = next(json.loads(m["content"])["output"].split()
                 for m in message["subagents"][0]["messages"] if m.get("name") == "execute_code")
    assert child[0] == "1" and child[1] != parent[0][1]
    assert wait_gone(child[1])  # stopped when the subagent ended
    assert tagged(parent[0][1])  # the parent's lives on with its session
    session.close()


def test_cancelling_the_parent_ends_every_subagent_and_its_processes(tmp_path: Path, fake_llm) -> None:
    session = make_session(fake_llm, tmp_path)
    pid_files = {n: session.cwd / f"{n}.pid" for n in ("a", "b", "c")}
    fake_llm.respond = router({n: (lambda d, n=n: {"tool_calls": [call(
        "terminal", command=f"echo $$ > {n}.pid; sleep 30")]} if not d else {"text": "never"})
        for n in pid_files})
    fake_llm.script([delegate("a", "b", "c")])

    async def main() -> str:
        async with anyio.create_task_group() as tg:
            out: list[str] = []

            async def turn() -> None:
                out.append(await run_turn(session, "go"))

            tg.start_soon(turn)
            while not all(p.exists() and p.read_text().strip() for p in pid_files.values()):
                await anyio.sleep(0.05)
            assert all(group_alive(int(p.read_text())) for p in pid_files.values())
            session.cancel()
        return out[0]

    assert anyio.run(main) == "cancelled"
    groups = [int(p.read_text()) for p in pid_files.values()]
    assert not any(group_alive(g) for g in groups)
    events = recorded(session)
    started = {e.id for e in events.of("ToolCallStarted")}
    finished = {e.id: e.status for e in events.of("ToolCallFinished")}
    assert set(finished) == started  # every card, the subagents' included, ended
    assert [s for i, s in finished.items() if "-sub" in i] == ["failed"] * 3
    assert_pairs_complete(session.messages)
