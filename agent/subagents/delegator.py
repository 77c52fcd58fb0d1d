"""Run `delegate_task`'s subagents: fresh sessions under the parent's turn, some at a time.

Each subagent is a `Session` built like any other (`spawn` is `runtime.spawn_subagent`, passed in
so this module does not import the runtime that wires it), with:
- its own context: the system prompt, then its goal and context as the one user message;
- its own execute_code kernel, in a pool of its own (so the front door's kernel cap does not
  count it, and it cannot push a user's session's kernel out), stopped when the subagent ends;
- the parent's tools minus `EXCLUDED_TOOLS`, minus `delegate_task` at `MAX_DEPTH`, narrowed to
  the task's toolsets; the parent's permissions (the mode the parent is in at each call,
  remembered answers, rejected paths), asking the user on the subagent's card;
- `subagent_max_turns` model calls, `subagent_concurrency` subagents running at once.

Cancelling the parent's turn cancels every subagent (they run inside its tool call); each card
still ends `failed` and each kernel is stopped. The parent gets each one's summary, files it
touched and tool counts; its transcript goes to the trajectory only (`_subagents`, which the
tool runner files under the call's result as `subagents`).
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from talaria.agent import events as ev
from talaria.agent import withheld_calls as withheld
from talaria.agent.config import Config
from talaria.agent.session import Session
from talaria.agent.subagents.door import ChildDoor
from talaria.agent.transcript import SubagentRun, is_assistant
from talaria.tools.execute_code.pool import KernelPool
from talaria.tools.handoffs import DelegateRequest, Task

log = logging.getLogger(__name__)

MAX_DEPTH = 2
"""A user's session is depth 0; its subagents 1; theirs 2, which may not delegate further."""
EXCLUDED_TOOLS = frozenset({"memory", "skill_manage", "clarify"})
"""Never given to a subagent: memory and skill writes are the user's session's to make, and
nobody answers a subagent's questions."""
SUMMARY_CHARS = 6000
"""Characters of a subagent's final message passed back (the rest is in the trajectory)."""
STATUS = {"end_turn": "completed", "max_turn_requests": "budget_exceeded",
          "max_tokens": "incomplete", "refusal": "refused", "cancelled": "cancelled"}
BRIEF = """{goal}

{context}You are a subagent: another agent delegated this task to you and sees only your final \
message. Work on it with your tools, then end with a short report: what you did and found, the \
files you changed, and anything left undone or uncertain. Nobody can answer questions, so decide \
yourself and say what you assumed. You have at most {turns} model calls."""

Spawn = Callable[..., Session]


class Delegator:
    """What `ToolState.delegate` calls for a session whose tools include `delegate_task`: one
    per call for a user's session (`runtime._delegate`), the subagent's own for a subagent."""

    def __init__(self, config: Config, parent: Session, spawn: Spawn) -> None:
        self.config = config
        self.parent = parent
        self.spawn = spawn

    async def __call__(self, request: DelegateRequest) -> dict[str, Any]:
        if self.parent.depth >= MAX_DEPTH:
            return {"error": f"subagents {MAX_DEPTH} levels deep may not delegate; do it yourself"}
        tools: list[Any] = []
        for task in request.tasks:
            chosen = self._tools(task)
            if isinstance(chosen, str):
                return {"error": chosen}
            tools.append(chosen)
        root = self.parent.door.root
        runs = [Run(self, i, task, f"{request.tool_call_id}-sub{i}", chosen, root)
                for i, (task, chosen) in enumerate(zip(request.tasks, tools, strict=True), 1)]
        for run in runs:  # every card first: a permission request never precedes its card
            await root.emit(run.card_started())
        limiter = anyio.CapacityLimiter(self.config.subagent_concurrency)
        try:
            async with anyio.create_task_group() as tg:
                for run in runs:
                    tg.start_soon(run.run, limiter)
        finally:
            with anyio.CancelScope(shield=True):
                for run in runs:
                    await run.end()
        withheld.absorb(self.parent, request.tool_call_id, [r.session for r in runs if r.session])
        return {"results": [run.report() for run in runs],
                "_subagents": [run.record() for run in runs]}

    def _tools(self, task: Task) -> list[Any] | str:
        """The tool specs a subagent gets, or why the task's toolsets cannot be honoured."""
        depth = self.parent.depth + 1
        allowed = [s for s in self.parent.tools if s.name not in EXCLUDED_TOOLS
                   and (s.name != "delegate_task" or depth < MAX_DEPTH)]
        if task.toolsets is None:
            return allowed
        chosen: dict[str, Any] = {}
        for wanted in task.toolsets:
            matched = [s for s in allowed if wanted in ("all", s.toolset, s.name)]
            if not matched:
                known = sorted({s.toolset for s in allowed} | {s.name for s in allowed})
                why = " (subagents may not use it)" if wanted in EXCLUDED_TOOLS else ""
                return f"unknown toolset {wanted!r}{why}; subagents may use: {', '.join(known)}"
            chosen.update((s.name, s) for s in matched)
        return list(chosen.values())

    def build(self, door: ChildDoor, tools: list[Any]) -> Session:
        parent = self.parent
        child = self.spawn(self.config, cwd=parent.cwd, door=door, provider=copy.copy(parent.provider),
                           mode=parent.permissions.mode, kernels=KernelPool(max_live=1),
                           additional_dirs=parent.additional_dirs)
        child.tools = tools
        child.depth = parent.depth + 1
        # The parent decides its subagents' calls (and their answers hold for it): its mode at
        # the moment of each call (a switch to plan holds for a subagent already running), its
        # remembered allow/reject, its rejected paths; only the asking goes through the card.
        child.permissions = parent.permissions.for_subagent(door.ask)
        child.max_turns = self.config.subagent_max_turns
        child.max_tokens, child.reasoning_effort = parent.max_tokens, parent.reasoning_effort
        child.context_window = parent.context_window
        child.tool_state.exec_settings = parent.tool_state.exec_settings
        # Its past sessions are the parent's, searched under the same policy (same dispatch).
        child.tool_state.recall = parent.tool_state.recall
        child.tool_state.recall_reach = parent.tool_state.recall_reach
        if parent.checkpoints is not None:  # its edits belong to the parent's turn
            child.checkpoints = parent.checkpoints.nested()
        if child.tool("delegate_task") is not None:
            child.tool_state.delegate = Delegator(self.config, child, self.spawn)
        return child


@dataclass(slots=True)
class Run:
    """One subagent of a `delegate_task` call."""

    delegator: Delegator
    index: int
    task: Task
    card: str
    tools: list[Any]
    root: Any
    door: ChildDoor = field(init=False)
    session: Session | None = None
    reason: str | None = None
    error: str | None = None
    started: float = 0.0
    duration: float = 0.0
    ended: bool = False

    def __post_init__(self) -> None:
        parent = self.delegator.parent
        self.door = ChildDoor(self.root, self.card, self.name, parent.cwd)

    @property
    def name(self) -> str:
        return f"Subagent {self.index}"

    def card_started(self) -> ev.ToolCallStarted:
        title = f"{self.name}: {' '.join(self.task.goal.split())[:80]}"
        return ev.ToolCallStarted(self.card, "subagent", title, "think", (),
                                  {"goal": self.task.goal, "context": self.task.context})

    async def run(self, limiter: anyio.CapacityLimiter) -> None:
        from talaria.agent.loop import run_turn
        from talaria.agent.providers.errors import ProviderError

        async with limiter:
            self.started = time.monotonic()
            try:
                session = self.session = self.delegator.build(self.door, self.tools)
                await self.root.emit(ev.ToolCallUpdated(self.card, status="in_progress"))
                await self.root.emit(self._changed("running"))
                self.reason = await run_turn(session, self.brief(session.max_turns))
            except ProviderError as exc:
                self.error = f"the model failed: {exc.user_message()}"
            except Exception as exc:  # one subagent's crash must not take the others down
                log.exception("subagent %s crashed", self.index)
                self.error = f"{type(exc).__name__}: {exc}"
            finally:
                self.duration = time.monotonic() - self.started
                if self.session is not None:
                    self.session.close()  # its kernel lives exactly as long as the subagent
                    # Its calls are the parent's turn's: the editor's cost and token counts.
                    self.delegator.parent.spend.absorb(self.session.spend)
                with anyio.CancelScope(shield=True):
                    await self.end()  # its card ends as it does, not with the slowest one

    def brief(self, turns: int) -> str:
        context = f"Context:\n{self.task.context}\n\n" if self.task.context else ""
        return BRIEF.format(goal=self.task.goal, context=context, turns=turns)

    @property
    def status(self) -> str:
        if self.error:
            return "failed"
        return STATUS.get(self.reason or "cancelled", "failed")

    def summary(self) -> str:
        messages = self.session.messages if self.session is not None else []
        last = next((m["content"] for m in reversed(messages) if is_assistant(m)
                     and isinstance(m.get("content"), str) and m["content"].strip()), None)
        if last is None:
            return "(the subagent ended without a summary)"
        return last if len(last) <= SUMMARY_CHARS else last[:SUMMARY_CHARS] + "\n… (cut)"

    def _why(self) -> str | None:
        if self.error:
            return self.error
        if self.status == "budget_exceeded":
            return (f"stopped after its budget of {self.delegator.config.subagent_max_turns} "
                    "model calls (subagent_max_turns); the summary is what it had said by then")
        if self.status == "cancelled":
            return "cancelled before it finished"
        return None

    async def end(self) -> None:
        """Finish the card (every card ends, cancelled or not) and tell the front door."""
        if self.ended:
            return
        self.ended = True
        why = self._why()
        text = f"{self.summary()}\n\n({why})" if why and self.session else why or self.summary()
        await self.root.emit(ev.ToolCallFinished(
            self.card, "completed" if self.status == "completed" else "failed",
            (self.door.progress(), {"type": "text", "text": text}), self.report()))
        if self.session is not None:
            await self.root.emit(self._changed("idle"))

    def _changed(self, state: str) -> ev.SubagentChanged:
        assert self.session is not None
        stop = None if state == "running" else "error" if self.error else self.reason or "cancelled"
        return ev.SubagentChanged(self.session.id, self.card, self.name, self.task.goal, state, stop)

    def report(self) -> dict[str, Any]:
        """What the parent model sees of this subagent."""
        session = self.session
        out: dict[str, Any] = {
            "task": self.index, "goal": self.task.goal, "status": self.status,
            "summary": self.summary() if session is not None else None,
            "files_touched": list(self.door.files), "tool_calls": dict(self.door.tool_counts),
            "model_calls": sum(map(is_assistant, session.messages if session else ())),
            "duration_s": round(self.duration, 2),
        }
        if why := self._why():
            out["error"] = why
        return out

    def record(self) -> SubagentRun:
        """The subagent's transcript, nested under the parent's call in the trajectory."""
        session = self.session
        return {"task": self.index, "goal": self.task.goal, "status": self.status,
                "session_id": session.id if session else None,
                "messages": list(session.messages) if session else []}
