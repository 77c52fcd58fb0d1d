"""Run the tool calls of one model turn: cards, permissions, concurrency, results.

Calls run concurrently when safe: read-only tools together, path-scoped tools whose paths
don't overlap; everything else alone, in order. Results keep the model's order. On
cancellation every call still gets a result and a finished card, so the transcript never
holds a tool call without its answer (providers reject such histories).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio

from talaria.agent import withheld_calls as withheld
from talaria.agent.events import (
    Emit,
    Notice,
    PlanUpdated,
    ToolCallFinished,
    ToolCallStarted,
    ToolCallUpdated,
)
from talaria.agent.permissions import READ_KINDS
from talaria.agent.providers.base import ToolCallRequest
from talaria.agent.session import Session
from talaria.agent.transcript import ToolMessage, UserMessage
from talaria.agent.vision import retired_images
from talaria.tools.context import ToolContext
from talaria.tools.environments.base import acting_where
from talaria.tools.errors import ToolError
from talaria.tools.paths import is_url, resolve
from talaria.tools.registry import NOTES, ToolSpec

log = logging.getLogger(__name__)

DISPLAY_TEXT_LIMIT = 8_000
CANCELLED = "Cancelled by the user before it finished."
UNCHANGING_KINDS = READ_KINDS | {"fetch", NOTES}
"""Kinds that never change the project's files: no checkpoint is taken before them."""


@dataclass(frozen=True, slots=True)
class PlannedCall:
    id: str
    name: str
    args: dict[str, Any]
    spec: ToolSpec | None
    paths: tuple[Path, ...]
    error: str | None = None
    where: str | None = None
    """Where the call acts when that is not this machine's project (an SSH host, a container):
    its card's title says so."""

    @property
    def kind(self) -> str:
        """The kind the permission policy judges (`ToolSpec.call_kind`: what the call does)."""
        return self.spec.call_kind(self.args) if self.spec else "other"

    @property
    def card_kind(self) -> str:
        """The ACP kind its card shows (`ToolSpec.card_kind`)."""
        return self.spec.card_kind(self.args) if self.spec else "other"

    @property
    def title(self) -> str:
        title = self.spec.call_title(self.args) if self.spec else self.name
        return f"{title} [on {self.where}]" if self.where else title


def plan_call(session: Session, call: ToolCallRequest) -> PlannedCall:
    if session.allowed_tools is not None and call.name not in session.allowed_tools:
        log.warning("session %s: refused %s (not in its tool whitelist)", session.id, call.name)
        allowed = ", ".join(sorted(session.allowed_tools))
        return PlannedCall(call.id, call.name, {}, None, (),
                           f"Refused: {call.name} is not allowed here. Allowed tools: {allowed}")
    spec = session.tool(call.name)
    try:
        args = json.loads(call.arguments or "{}")
    except json.JSONDecodeError as exc:
        return PlannedCall(call.id, call.name, {}, spec, (), f"Invalid JSON arguments: {exc}")
    if not isinstance(args, dict):
        return PlannedCall(call.id, call.name, {}, spec, (), "Arguments must be a JSON object.")
    if spec is None:
        known = ", ".join(s.name for s in session.current_tools())
        return PlannedCall(call.id, call.name, args, None, (), f"Unknown tool {call.name!r}. Tools: {known}")
    missing = [k for k in spec.parameters.get("required", ()) if k not in args]
    if missing:
        return PlannedCall(call.id, call.name, args, spec, (), f"Missing argument(s): {', '.join(missing)}")
    urls = [args[n] for n in spec.url_args if isinstance(args.get(n), str) and is_url(args[n])]
    paths = tuple(
        resolve(str(args[name]), session.cwd)
        for name in spec.path_args
        if isinstance(args.get(name), str) and args[name] and args[name] not in urls
    )
    if not paths and spec.default_path:
        paths = (session.cwd,)
    if spec.call_paths is not None:  # what the call reads beyond its arguments (other projects)
        paths += tuple(resolve(raw, session.cwd) for raw in spec.call_paths(args, session.tool_state))
    where = acting_where(session.workspace, spec.call_kind(args))
    return PlannedCall(call.id, call.name, args, spec, paths, where=where)


async def run_tool_calls(session: Session, calls: list[ToolCallRequest]) -> None:
    """Run the calls and append their results to the session, in the model's order."""
    emit = session.door.emit
    planned = [plan_call(session, call) for call in calls]
    for p in planned:
        await emit(started_event(p))
    results: dict[str, ToolMessage] = {}
    attached: dict[str, UserMessage] = {}
    try:
        for batch in batches(planned):
            async with anyio.create_task_group() as tg:
                for p in batch:
                    tg.start_soon(_run_into, session, p, emit, results, attached)
    finally:
        with anyio.CancelScope(shield=True):
            for p in planned:
                if p.id not in results:
                    results[p.id] = await finish(p, {"error": CANCELLED, "cancelled": True}, emit)
            for p in planned:
                await session.record(withheld.mark(session, p, results[p.id]))
            # After every result: OpenAI wants tool messages right after their calls, and
            # Anthropic merges this into the user turn that carries the tool_result blocks.
            for p in planned:
                if p.id in attached:
                    await session.record(attached[p.id])
            if attached:
                session.context.edit(retired_images(session.messages))


async def _run_into(session: Session, p: PlannedCall, emit: Emit, results: dict[str, ToolMessage],
                    attached: dict[str, UserMessage]) -> None:
    result = await execute(session, p, emit)
    if isinstance(image := result.get("_attach"), dict):
        attached[p.id] = attachment(p.id, image)
    results[p.id] = await finish(p, result, emit)


def attachment(call_id: str, image: dict[str, Any]) -> UserMessage:
    """The user message that shows the model an image a tool attached (`_attach`: text,
    mime_type, data): the model's next call sees it; `tool_image` names the call."""
    return {"role": "user", "tool_image": call_id, "content": [
        {"type": "text", "text": str(image.get("text") or "")},
        {"type": "image", "mime_type": image["mime_type"], "data": image["data"]},
    ]}


async def execute(session: Session, p: PlannedCall, emit: Emit, *, nested: bool = False) -> dict[str, Any]:
    """Permission, then the handler; returns the tool's result dict."""
    if p.error or p.spec is None:
        return {"error": p.error or f"Unknown tool {p.name!r}"}
    ctx = ToolContext(
        workspace=session.workspace, session_id=session.id, tool_call_id=p.id,
        state=session.tool_state, report=_reporter(p.id, emit),
        call_tool=lambda name, args: call_nested(session, name, args, p.id), nested=nested,
    )
    # Looked up now, not when the turn was planned: the process may have ended since.
    running = p.spec.target(p.args, session.tool_state) if p.spec.target else None
    decision = await session.permissions.decide(
        tool_call_id=p.id, tool=p.name, kind=p.kind, title=p.title, paths=p.paths,
        command=p.spec.command(p.args), preview=_previewer(p, ctx), running=running,
    )
    if decision.refusal:
        return {"error": decision.refusal, "rejected": True}
    await emit(ToolCallUpdated(p.id, status="in_progress"))
    checkpoints = session.checkpoints
    changes = checkpoints is not None and p.kind not in UNCHANGING_KINDS
    if changes and checkpoints and (note := await checkpoints.before_change()):
        await emit(Notice(note, quiet=True))  # the turn's first change is snapshotted before it runs
    ctx.sandbox, ctx.conceal = decision.sandbox, decision.conceal
    result = await invoke(p.spec, p.args, ctx)
    if checkpoints is not None and isinstance(diff := result.get("_diff"), dict):
        checkpoints.record_write(str(diff.get("path")), diff.get("old_text"))
    return result


async def invoke(spec: ToolSpec, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Run a tool's handler; its failures become results (the one place, see tools.errors)."""
    try:
        return await spec.handler(args, ctx)
    except anyio.get_cancelled_exc_class():
        raise
    except (ToolError, OSError) as exc:  # expected failures: the message is for the model
        return {"error": str(exc)}
    except Exception as exc:  # a tool bug must not kill the turn; the model sees it
        log.exception("tool %s crashed", spec.name)
        return {"error": f"{spec.name} failed: {type(exc).__name__}: {exc}"}


def _previewer(
    p: PlannedCall, ctx: ToolContext
) -> Callable[[], Awaitable[dict[str, Any] | None]] | None:
    """The diff a person is shown before allowing an edit, computed only when they are asked."""
    spec = p.spec
    if spec is None or spec.preview is None:
        return None
    preview = spec.preview

    async def run() -> dict[str, Any] | None:
        try:
            return await preview(p.args, ctx)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception:  # the question is still asked, only without its diff
            log.exception("preview of %s crashed", p.name)
            return None

    return run


async def call_nested(session: Session, name: str, args: dict[str, Any],
                      parent: str | None = None) -> dict[str, Any]:
    """A tool call made from inside another tool (execute_code, call `parent`): same cards,
    same checks; a secret it reaches marks the outer call's stored result."""
    emit = session.door.emit
    call = ToolCallRequest(session.nested_call_id(), name, json.dumps(args))
    p = plan_call(session, call)
    if parent is not None:
        withheld.nested(session, parent, p)
    await emit(started_event(p))
    result: dict[str, Any] = {"error": CANCELLED, "cancelled": True}
    try:
        result = await execute(session, p, emit, nested=True)
    finally:
        with anyio.CancelScope(shield=True):
            await finish(p, result, emit)
    return visible(result)


def started_event(p: PlannedCall) -> ToolCallStarted:
    return ToolCallStarted(p.id, p.name, p.title, p.card_kind, tuple(map(str, p.paths)), p.args)


async def finish(p: PlannedCall, result: dict[str, Any], emit: Emit) -> ToolMessage:
    status: Literal["completed", "failed"] = "failed" if "error" in result else "completed"
    content = display(result)
    await emit(ToolCallFinished(p.id, status, content, visible(result)))
    message: ToolMessage = {
        "role": "tool", "tool_call_id": p.id, "name": p.name,
        "content": render(result), "status": status, "display": list(content),
        "locations": [str(path) for path in p.paths],
    }
    if subagents := result.get("_subagents"):  # their transcripts, for the trajectory only
        message["subagents"] = subagents
    return message


def _reporter(call_id: str, emit: Emit) -> Callable[[dict[str, Any]], Awaitable[None]]:
    async def report(update: dict[str, Any]) -> None:
        if "terminal_id" in update:
            item = {"type": "terminal", "terminal_id": update["terminal_id"]}
            await emit(ToolCallUpdated(call_id, content=(item,)))
        if "plan" in update:
            await emit(PlanUpdated(tuple(update["plan"])))
        if isinstance(update.get("text"), str):  # e.g. the URLs a web call reads
            await emit(ToolCallUpdated(call_id, content=({"type": "text", "text": update["text"]},)))

    return report


def visible(result: dict[str, Any]) -> dict[str, Any]:
    """The part of a result the model sees: `_`-prefixed keys are for front doors."""
    return {k: v for k, v in result.items() if not k.startswith("_")}


def render(result: dict[str, Any]) -> str:
    return json.dumps(visible(result), ensure_ascii=False)


def display(result: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """Front-door content of a finished call: diff, terminal, or capped text."""
    items: list[dict[str, Any]] = []
    if diff := result.get("_diff"):
        items.append({"type": "diff", **diff})
    if terminal_id := result.get("_terminal_id"):
        items.append({"type": "terminal", "terminal_id": terminal_id})
    if "error" in result:
        items.append({"type": "text", "text": str(result["error"])})
    elif not items:
        text = result.get("_display") or result.get("content") or result.get("output")
        if not isinstance(text, str):
            text = render(result)
        if len(text) > DISPLAY_TEXT_LIMIT:
            text = text[:DISPLAY_TEXT_LIMIT] + f"\n… ({len(text) - DISPLAY_TEXT_LIMIT} more characters)"
        items.append({"type": "text", "text": text})
    return tuple(items)


def batches(planned: list[PlannedCall]) -> list[list[PlannedCall]]:
    """Group consecutive calls that may run together, keeping the model's order."""
    groups: list[list[PlannedCall]] = []
    current: list[PlannedCall] = []
    reads: list[Path] = []
    writes: list[Path] = []
    for p in planned:
        spec = p.spec
        if p.error or spec is None:
            ok, mode = True, "none"
        elif spec.parallel_safe:
            ok, mode = not _overlap(p.paths, writes), "read"
        elif spec.path_args and p.paths and not spec.exclusive:
            ok, mode = not _overlap(p.paths, writes + reads), "write"
        else:
            ok, mode = False, "alone"
        if current and not ok:
            groups.append(current)
            current, reads, writes = [], [], []
        current.append(p)
        (reads if mode == "read" else writes).extend(p.paths)
        if mode == "alone":
            groups.append(current)
            current, reads, writes = [], [], []
    if current:
        groups.append(current)
    return groups


def _overlap(paths: tuple[Path, ...], others: list[Path]) -> bool:
    return any(a == b or a in b.parents or b in a.parents for a in paths for b in others)
