"""The agent loop: query the model, run its tool calls, append results, repeat.

A turn ends when the model stops calling tools (`end_turn`), runs out of output tokens
(`max_tokens`), refuses (`refusal`), exceeds `max_turns` model calls (`max_turn_requests`),
or is cancelled (`cancelled`). Provider errors propagate to the front door after the user's
message is safely in the transcript. Every message is committed as it is appended.

Steering: notes the user sends during the turn (`/steer`) wait in `session.steer_notes` and
join the context as user messages right before the next model call, never between a tool call
and its result; a turn that would end with notes still waiting goes on to read them.
Checkpoints: `session.checkpoints` hears when a turn begins and ends (the snapshot itself is
taken by the tool runner before the turn's first change).
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from talaria.agent.context.compaction import compact_if_needed
from talaria.agent.context.fit import answer_room, fit_after_overflow, refused_again
from talaria.agent.events import Emit, Notice, TextChunk, ThoughtChunk, TitleUpdated, UsageUpdated
from talaria.agent.prompt import flattened
from talaria.agent.providers.base import (
    Finish,
    ReasoningDelta,
    Retrying,
    TextDelta,
    ToolCallRequest,
    Usage,
)
from talaria.agent.providers.errors import ContextOverflowError
from talaria.agent.session import Session
from talaria.agent.tool_runner import run_tool_calls
from talaria.agent.transcript import AssistantExtras, AssistantMessage, CallUsage, content_text

TITLE_LIMIT = 60
STEER_PREFIX = "[Sent by the user while you were working; take it into account:]\n"


class TurnEnded(Exception):
    """Ends a turn early; carries the ACP stop reason."""

    def __init__(self, stop_reason: str) -> None:
        super().__init__(stop_reason)
        self.stop_reason = stop_reason


async def run_turn(session: Session, content: str | list[dict[str, Any]]) -> str:
    """Run one user prompt to completion; returns the ACP stop reason. Events go to the
    session's front door as they happen."""
    emit = session.door.emit
    if not session.supports_images and _has_images(content):
        await emit(Notice(f"{session.provider.name} does not take images; they were left out.",
                          "warning"))
        assert not isinstance(content, str)  # _has_images is False for plain text
        content = [part if part.get("type") != "image" else
                   {"type": "text", "text": "[an image was attached; this model cannot see images]"}
                   for part in content]
    await session.record({"role": "user", "content": content})
    if session.checkpoints is not None:
        session.checkpoints.begin_turn(content_text(content, sep=" "))
    with anyio.CancelScope() as scope:
        session.cancel_scope = scope
        try:
            reason = await _steps(session, emit)
        except TurnEnded as end:
            reason = end.stop_reason
        finally:
            session.cancel_scope = None
            if session.checkpoints is not None:
                with anyio.CancelScope(shield=True):
                    await session.checkpoints.end_turn()
        await _title(session, content, emit)
        return reason
    return "cancelled"


async def _steps(session: Session, emit: Emit) -> str:
    for _ in range(session.max_turns):
        take_steering(session)
        take_process_notes(session)
        for notice in session.tool_notices():  # an MCP server failed or came back
            await emit(Notice(notice, "warning"))
        used = session.context.used(session.tool_definitions())
        if await compact_if_needed(session, used) is not None:  # sized again: the room it left
            used = session.context.used(session.tool_definitions())
        room = await answer_room(session, used)
        try:
            message, calls, finish = await query(session, emit, room)
        except ContextOverflowError as error:
            # The provider's word beats our estimate: learn its window, compact to fit it,
            # retry the call once; a second refusal ends the turn with the numbers.
            room = await fit_after_overflow(session, error)
            try:
                message, calls, finish = await query(session, emit, room)
            except ContextOverflowError as again:
                raise await refused_again(session, again) from None
        session.append(message)
        if finish.reason == "refusal":
            raise TurnEnded("refusal")
        if finish.reason == "length" and not calls:
            raise TurnEnded("max_tokens")
        if not calls:
            if session.steer_notes:
                continue  # a note came while the model answered: it reads it before ending
            return "end_turn"
        await run_tool_calls(session, calls)
    raise TurnEnded("max_turn_requests")


async def query(
    session: Session, emit: Emit, max_tokens: int | None = None,
) -> tuple[AssistantMessage, list[ToolCallRequest], Finish]:
    """Stream one model call; returns the assistant message, its tool calls and finish.
    `max_tokens`: the answer's room (default: the session's)."""
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCallRequest] = []
    usage, finish = Usage(), Finish("stop")
    started = time.monotonic()
    stream = session.provider.stream(
        session.messages, session.tool_definitions(), max_tokens=max_tokens or session.max_tokens,
        reasoning_effort=session.reasoning_effort,
    )
    try:
        async for event in stream:
            match event:
                case TextDelta(text=delta):
                    text.append(delta)
                    await emit(TextChunk(delta))
                case ReasoningDelta(text=delta):
                    reasoning.append(delta)
                    await emit(ThoughtChunk(delta))
                case ToolCallRequest():
                    calls.append(event)
                case Usage():
                    usage = event
                case Finish():
                    finish = event
                case Retrying():
                    # The failed attempt's partial output is discarded; the user is told.
                    text.clear()
                    reasoning.clear()
                    calls.clear()
                    await emit(Notice(f"{event.error}; retrying in {event.delay:.1f}s "
                                      f"(attempt {event.attempt}, {event.provider})", "warning"))
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            if text or reasoning:
                cut = _assistant(text, reasoning, [], AssistantExtras())
                cut["interrupted"] = True
                session.append(cut)
        raise
    finally:
        await _aclose(stream)
    message = _assistant(text, reasoning, calls, finish.extras)
    message["usage"] = CallUsage(
        input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens, cache_write_tokens=usage.cache_write_tokens,
        reasoning_tokens=usage.reasoning_tokens)
    message["model"] = session.provider.name
    message["duration_ms"] = round((time.monotonic() - started) * 1000, 1)
    await _usage(session, usage, emit)
    return message, calls, finish


def take_steering(session: Session) -> None:
    """The user's `/steer` notes, in order, as user messages (in the transcript too)."""
    while session.steer_notes:
        note = session.steer_notes.pop(0)
        session.append({"role": "user", "content": STEER_PREFIX + note, "steer": True})


def take_process_notes(session: Session) -> None:
    """Background processes that ended and whose end the model asked to hear of."""
    table = session.tool_state.processes
    for note in table.take_notes() if table is not None else ():
        session.append({"role": "user", "content": note, "process_note": True})


def _assistant(
    text: list[str], reasoning: list[str], calls: list[ToolCallRequest], extras: AssistantExtras
) -> AssistantMessage:
    message: AssistantMessage = {"role": "assistant", "content": "".join(text)}
    if reasoning:
        message["reasoning"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]
    message.update(extras)
    return message


async def _usage(session: Session, usage: Usage, emit: Emit) -> None:
    spend = session.spend
    spend.add(session.provider.name, {
        "input": usage.input_tokens, "output": usage.output_tokens,
        "cache_read": usage.cache_read_tokens, "cache_write": usage.cache_write_tokens,
        "reasoning": usage.reasoning_tokens})
    if session.store is not None:  # a loaded session's cost goes on from its total
        session.store.update_session(session.id, meta={"spend": spend.to_json()})
    used = usage.input_tokens + usage.output_tokens  # input_tokens: the whole prompt
    if used == 0:  # the provider reported nothing: count it ourselves, off the event loop
        used = await session.context.exact(session.tool_definitions())
    session.context.last_usage = used
    await emit(UsageUpdated(
        used=used, size=session.context_window, input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens, cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens, cost_usd=spend.cost,
    ))


def _has_images(content: str | list[dict[str, Any]]) -> bool:
    return not isinstance(content, str) and any(part.get("type") == "image" for part in content)


async def _title(session: Session, content: str | list[dict[str, Any]], emit: Emit) -> None:
    if session.title is not None:
        return
    first = flattened(content_text(content, sep=" "), TITLE_LIMIT).strip() or "Untitled"
    session.title = first
    if session.store is not None:
        session.store.update_session(session.id, title=first)
    with anyio.CancelScope(shield=True):
        await emit(TitleUpdated(first))


async def _aclose(stream: Any) -> None:
    close = getattr(stream, "aclose", None)
    if close is not None:
        with anyio.CancelScope(shield=True):
            await close()
