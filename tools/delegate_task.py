"""`delegate_task`: hand work to subagents, one or several in parallel (Hermes-compatible).

Each subagent is a fresh session with its own context window, its own execute_code kernel, a
restricted toolset and a budget of model calls; the caller gets back each one's summary, the
files it touched and its tool counts, never its transcript. Tools cannot build sessions (the
agent layer sits above them), so the work is done by `ctx.state.delegate`, which the runtime
sets (`talaria.agent.subagents`); it is None where delegation is not allowed.
"""

from __future__ import annotations

from typing import Any

from talaria.tools.context import ToolContext
from talaria.tools.handoffs import DelegateRequest, Task
from talaria.tools.registry import tool

MAX_TASKS = 8
"""Subagents one call may start (they run `subagent_concurrency` at a time)."""
MAX_GOAL_CHARS = 4000
MAX_CONTEXT_CHARS = 20_000




def _task(raw: Any, toolsets: Any, where: str) -> Task | str:
    if not isinstance(raw, dict):
        return f"{where} must be an object with a goal"
    goal, context = raw.get("goal"), raw.get("context") or ""
    if not isinstance(goal, str) or not goal.strip():
        return f"{where} needs a goal: what the subagent should do, in one or two sentences"
    if not isinstance(context, str):
        return f"{where}: context must be a string"
    if len(goal) > MAX_GOAL_CHARS or len(context) > MAX_CONTEXT_CHARS:
        return (f"{where}: the goal may have at most {MAX_GOAL_CHARS} characters and the context "
                f"{MAX_CONTEXT_CHARS}; put long material in a file and name it")
    toolsets = raw.get("toolsets", toolsets)
    if toolsets is not None and (not isinstance(toolsets, list)
                                 or not all(isinstance(t, str) for t in toolsets)):
        return f"{where}: toolsets must be a list of toolset or tool names"
    return Task(goal.strip(), context.strip(), tuple(toolsets) if toolsets is not None else None)


def parse_tasks(args: dict[str, Any]) -> tuple[Task, ...] | str:
    """The tasks of a call (`tasks`, or the one `goal`), or an error message."""
    tasks = args.get("tasks")
    if tasks is None:
        if args.get("goal") is None:
            return "give a goal (one subagent) or tasks: [{goal, context}] (several in parallel)"
        parsed = _task(args, args.get("toolsets"), "the task")
        return parsed if isinstance(parsed, str) else (parsed,)
    if not isinstance(tasks, list) or not tasks:
        return "tasks must be a non-empty list of {goal, context} objects"
    if len(tasks) > MAX_TASKS:
        return f"at most {MAX_TASKS} tasks per call; split the work or give each task more"
    out = []
    for i, raw in enumerate(tasks, 1):
        parsed = _task(raw, args.get("toolsets"), f"task {i}")
        if isinstance(parsed, str):
            return parsed
        out.append(parsed)
    return tuple(out)


def _title(args: dict[str, Any]) -> str:
    tasks = args.get("tasks")
    if isinstance(tasks, list) and tasks:
        return f"Delegate {len(tasks)} tasks to subagents"
    return f"Delegate: {str(args['goal'])[:80]}"


@tool(
    name="delegate_task",
    description=(
        "Hand self-contained work to subagents: each starts with only its goal and context, "
        "works with the tools and returns a summary, the files it touched and tool counts. "
        "`tasks` runs several in parallel."
    ),
    parameters={
        "type": "object",
        "properties": {
            "goal": {"type": "string"},
            "context": {"type": "string", "description": "All it needs: paths, constraints"},
            "toolsets": {"type": "array", "items": {"type": "string"}},
            "tasks": {"type": "array", "items": {"type": "object", "properties": {
                "goal": {"type": "string"}, "context": {"type": "string"}},
                "required": ["goal"]}},
        },
    },
    kind="think",
    title=_title,
)
async def delegate_task(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    tasks = parse_tasks(args)
    if isinstance(tasks, str):
        return {"error": tasks}
    if ctx.state.delegate is None:
        return {"error": "delegate_task is not available in this session (subagents may not "
                         "delegate further); do the work yourself"}
    return await ctx.state.delegate(DelegateRequest(tasks, ctx.tool_call_id))
