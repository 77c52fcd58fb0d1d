"""Context compression that never loses the task.

    compact(session)          stage 1 (deterministic, see compaction_stage1), then, only if the
                              context is still over budget, stage 2: a model summary of the middle

Head (system prompt + first user task) stays verbatim, and so does the tail. During a turn
(automatic and overflow compaction) what is kept as messages, not summarised, is a token budget
of recent turns (`RECENT_SHARE`) that never splits a tool call from its result and always holds
the live turn, from its user message on; of it, only the last `TAIL_SHARE` stays byte for byte:
older tool outputs in it become stage 1's one-liners (user and assistant text untouched, the
pending ask's images too), so that a long turn can shrink its own old outputs. Between turns
(the user's `/compact`) every finished turn is fair game: the tail is only the final answer and
any pending question (a turn cut short keeps its question and what it did since). The summary
follows a handoff template and is marked as reference material; a later compaction updates the
previous summary instead of summarising a summary. If the summary call fails, a deterministic
summary built from the transcript stands in, marked as such. A compaction that does not shrink
the context by `MIN_REDUCTION` is reported, not retried in a loop. Its budgets and totals take
the counts already made (the loop counts exactly before an automatic compaction) and estimate
the rest (`tokens.estimate`): counting a 1M-token session it has never counted would take
~0.3 s of tokenizer for figures no decision on the window rests on. Nothing is deleted: the store
keeps every message; the compacted context is saved as a snapshot beside it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from talaria.agent.context import tokens
from talaria.agent.context.stage1 import stage1
from talaria.agent.context.summarizer import ProviderSummarizer, Summarizer
from talaria.agent.events import Compacted, CompactionText, figure
from talaria.agent.session import Session
from talaria.agent.transcript import (
    CompactionEvent,
    Message,
    UserMessage,
    call_arguments,
    calls_of,
    is_answer,
    is_prompt,
    is_system,
    is_tool_result,
    is_user,
    plain,
    text_of,
)

log = logging.getLogger(__name__)

TARGET_SHARE = 0.5
"""Stage 2 runs only when stage 1 leaves the context above this share of the window."""
RECENT_SHARE = 0.2
"""During a turn: token budget of the recent turns kept as messages (not summarised), as a
share of the window."""
TAIL_SHARE = 0.1
"""During a turn: token budget of the tail kept byte for byte, as a share of the window. Hermes
keeps 0.15 of a window under 512K (0.1 above) plus up to half as much again, pruned; at 0.2
Talaria removed a smaller share than Hermes at every session size (issue 29)."""
MIN_REDUCTION = 0.1
SUMMARY_TIMEOUT = 120.0
SUMMARY_MARK = "[CONTEXT SUMMARY]"
TRANSCRIPT_CHARS_PER_MESSAGE = 4_000

TEMPLATE = """\
You are writing a handoff note so that another engineer can continue this coding session without
the transcript. Be concrete: file paths, function names, commands, exact error messages, numbers.
Use exactly these sections:

## Goal
## Constraints and preferences (everything the user asked for or ruled out)
## Completed actions (with outcomes)
## Current state
## Open work (what remains, in order)
## Files touched
## Key decisions (and why)
"""


def new_compaction_id() -> str:
    return uuid.uuid4().hex[:12]


@dataclass(frozen=True, slots=True)
class Compaction:
    messages: list[Message]
    before: int
    """Tokens before and after: exact where the texts were counted, else estimated."""
    after: int
    stage: int
    summary: str | None = None
    fallback: bool = False
    error: str | None = None
    dropped: tuple[int, int] = (0, 0)
    """Index span [start, end) of the pre-compaction context replaced by the summary."""
    id: str = field(default_factory=lambda: new_compaction_id())
    estimated: tuple[bool, bool] = (False, False)
    """Whether `before` and `after` are estimates (some texts never counted: a summary is
    not counted, nor a context compacted before the loop counted it)."""

    @property
    def progress(self) -> bool:
        return self.after < self.before * (1 - MIN_REDUCTION)


def boundaries(
    messages: list[Message], tail_budget: int, *, between_turns: bool = False,
) -> tuple[int, int]:
    """(end of head, start of the recent turns kept as messages). During a turn they are the
    last `tail_budget` tokens, never start on a tool result and always include the latest user
    message; between turns they are the final answer and any pending question (see the module
    docstring)."""
    head = 0
    while head < len(messages) and is_system(messages[head]):
        head += 1
    first_user = next((i for i in range(head, len(messages)) if is_user(messages[i])), None)
    head = first_user + 1 if first_user is not None else head
    if between_turns:
        return head, max(_settled_tail(messages), head)
    last_user = max((i for i, m in enumerate(messages) if is_prompt(m)), default=head)
    start = min(recent_start(messages, head, tail_budget), max(last_user, head))
    while start > head and is_tool_result(messages[start]):
        start -= 1  # keep the assistant message with its tool results
    return head, max(start, head)


def recent_start(messages: list[Message], floor: int, budget: int) -> int:
    """Where the last `budget` tokens of `messages` start (at least the last message, at most
    back to `floor`), never on a tool result: the assistant message stays with its results."""
    start, used = len(messages), 0
    while start > floor:
        cost = tokens.estimate_messages([messages[start - 1]])
        if used + cost > budget and start < len(messages):
            break
        used += cost
        start -= 1
    while start > floor and is_tool_result(messages[start]):
        start -= 1
    return start


def cuts(messages: list[Message], window: int, *, between_turns: bool = False) -> tuple[int, int, int]:
    """(end of head, start of the kept turns, start of the verbatim tail): a summary may replace
    [head, kept), stage 1 works on [head, verbatim); between turns `verbatim` is `kept`."""
    head, kept = boundaries(messages, int(window * RECENT_SHARE), between_turns=between_turns)
    if between_turns:
        return head, kept, kept
    return head, kept, max(recent_start(messages, head, int(window * TAIL_SHARE)), kept)


def _settled_tail(messages: list[Message]) -> int:
    """Between turns: where the last answer or user message starts (a question still pending,
    or one whose turn was cut short, keeps what that turn did after it), with the answer
    right before a pending question."""
    last = next((i for i in range(len(messages) - 1, -1, -1)
                 if is_user(messages[i]) or is_answer(messages[i])), 0)
    if last > 0 and is_user(messages[last]) and is_answer(messages[last - 1]):
        last -= 1
    return last


def render_transcript(messages: list[Message]) -> str:
    lines = []
    for message in messages:
        text = text_of(message, image="[image]", sep=" ")
        if len(text) > TRANSCRIPT_CHARS_PER_MESSAGE:
            text = text[:TRANSCRIPT_CHARS_PER_MESSAGE] + f" …[{len(text)} chars]"
        for call in calls_of(message):
            text += f"\n-> {call['name']}({call.get('arguments', '')[:600]})"
        lines.append(f"### {message.get('role')}\n{text}")
    return "\n\n".join(lines)


def fallback_summary(middle: list[Message], reason: str) -> str:
    """A deterministic summary from the transcript, used when the model summary fails."""
    asks = [str(m["content"])[:500] for m in middle
            if is_user(m) and isinstance(m.get("content"), str)
            and not m["content"].startswith(SUMMARY_MARK)]
    previous = [m["content"] for m in middle
                if is_user(m) and str(m.get("content", "")).startswith(SUMMARY_MARK)]
    files: dict[str, None] = {}
    actions = []
    for m in middle:
        for call in calls_of(m):
            path = call_arguments(call).get("path")
            if isinstance(path, str):
                files[path] = None
        if is_tool_result(m):
            actions.append(str(m.get("content", ""))[:200])
    lines = [f"(fallback summary: the summary model failed: {reason})"]
    lines += [f"Earlier summary:\n{p}" for p in previous[-1:]]
    lines += ["## User requests"] + [f"- {a}" for a in asks]
    lines += ["## Tool results (oldest first)"] + [f"- {a}" for a in actions[-40:]]
    lines += ["## Files touched"] + [f"- {f}" for f in files]
    return "\n".join(lines)


async def compact(
    messages: list[Message], *, window: int, tools: list[dict[str, Any]], summarizer: Summarizer,
    focus: str | None = None, force_summary: bool = False, between_turns: bool = False,
    on_text: Callable[[str], Awaitable[None]] | None = None, compaction_id: str | None = None,
) -> Compaction:
    """`on_text`: each piece of the summary as a model writes it (`ProviderSummarizer`);
    `compaction_id`: the result's id (default: a new one), known to `on_text`'s receiver."""
    ident = compaction_id or new_compaction_id()
    # Stage 1 and the transcript for the summary are CPU work over the whole context, tens of
    # ms for a 1 MB message: a worker thread, so that the event loop goes on serving other
    # requests (issue 9).
    before, head, tail, reduced, after, estimated = await anyio.to_thread.run_sync(
        _stage1, messages, window, tools, between_turns)
    if not force_summary and after <= window * TARGET_SHARE:
        return Compaction(reduced, before, after, stage=1, id=ident, estimated=estimated)
    middle = reduced[head:tail]
    if not middle:
        return Compaction(reduced, before, after, stage=1, id=ident, estimated=estimated)
    instructions = TEMPLATE
    if any(str(m.get("content", "")).startswith(SUMMARY_MARK) for m in middle):
        instructions += "\nThe transcript starts with the previous summary: update it with what " \
                        "happened since; keep what is still true, drop what is done or obsolete."
    if focus:
        instructions += f"\nThe user asks the summary to focus on: {focus}"
    fallback, error = False, None
    try:
        with anyio.fail_after(SUMMARY_TIMEOUT):
            transcript = await anyio.to_thread.run_sync(render_transcript, middle)
            if on_text is not None and isinstance(summarizer, ProviderSummarizer):
                summary = await summarizer.summarize(instructions, transcript, on_text)
            else:
                summary = await summarizer.summarize(instructions, transcript)
            summary = summary.strip()
        if not summary:
            raise ValueError("the summary model returned nothing")
        # One marker per context: an echoed marker would make the next update nest summaries.
        summary = summary.replace(SUMMARY_MARK, "(earlier summary)")
    except Exception as exc:  # any failure: the deterministic summary stands in, visibly
        log.warning("summary failed: %s", exc)
        fallback, error = True, f"{type(exc).__name__}: {exc}"
        summary = fallback_summary(middle, error)
    note: UserMessage = {"role": "user", "content": (
        f"{SUMMARY_MARK} Reference material: a summary of the earlier part of this session "
        f"({tail - head} messages), not new instructions.\n\n{summary}")}
    new = reduced[:head] + [plain(note)] + reduced[tail:]
    after += tokens.estimate_messages([plain(note)]) - tokens.estimate_messages(middle)
    return Compaction(new, before, after, stage=2, summary=summary, fallback=fallback,
                      error=error, dropped=(head, tail), id=ident, estimated=(estimated[0], True))


def _stage1(
    messages: list[Message], window: int, tools: list[dict[str, Any]], between_turns: bool
) -> tuple[int, int, int, list[Message], int, tuple[bool, bool]]:
    """(before, head, tail, reduced, after, whether before and after are estimates) of stage 1
    (see `cuts`)."""
    before, exact = tokens.estimate_total(messages, tools)
    head, tail, verbatim = cuts(messages, window, between_turns=between_turns)
    reduced = stage1(messages, head, verbatim)
    # Totals by difference: only the messages stage 1 replaced are sized again.
    changed = [i for i in range(head, verbatim) if reduced[i] is not messages[i]]
    now, now_exact = tokens.estimate_total([reduced[i] for i in changed])
    after = before - tokens.estimate_messages([messages[i] for i in changed]) + now
    return before, head, tail, reduced, after, (not exact, not (exact and now_exact))


def summarizer_for(session: Session) -> Summarizer:
    return session.summarizer or ProviderSummarizer(session.provider, spend=session.spend)


async def compact_session(
    session: Session, *, focus: str | None = None, force_summary: bool = False,
    reason: str = "manual", between_turns: bool | None = None, window: int | None = None,
) -> Compaction:
    """Compact the live context, save the snapshot and the event, tell the front door.
    `between_turns` (default: `reason == "manual"`, the user's /compact, which runs between
    prompts) lets compaction take finished turns; automatic and overflow compaction run
    inside a turn and keep it whole. `window`: the tokens to compact for (default: the
    session's window; `context.fit` passes the room a provider's limit leaves)."""
    if between_turns is None:
        between_turns = reason == "manual"
    if window is None:
        window = session.context_window
        if reason == "overflow":
            # The provider's limit is below what we were told: size the tail by what we have.
            window = min(window, await session.context.exact(session.tool_definitions()))
    ident = new_compaction_id()

    async def streamed(text: str) -> None:  # the summary as it is written (ACP: chunks)
        await session.door.emit(CompactionText(ident, text))

    result = await compact(
        list(session.messages), window=window, tools=session.tool_definitions(),
        summarizer=summarizer_for(session), focus=focus, force_summary=force_summary,
        between_turns=between_turns, on_text=streamed, compaction_id=ident,
    )
    if result.progress:
        # No usage: `after` may be an estimate; the loop bounds or counts the new context.
        session.context.replace(result.messages)
        if session.store is not None:  # the whole context as JSON: off the loop too
            await anyio.to_thread.run_sync(session.store.save_context, session.id, result.messages)
    else:
        session.context.mark_stalled()
    if session.store is not None:
        event: CompactionEvent = {
            "role": "event", "type": "compaction", "id": result.id, "reason": reason,
            "stage": result.stage, "before_tokens": result.before, "after_tokens": result.after,
            "applied": result.progress, "fallback": result.fallback, "error": result.error,
            "dropped": list(result.dropped), "summary": result.summary,
            "estimated": list(result.estimated),
        }
        session.store.append(session.id, event)
    await session.door.emit(Compacted(
        result.id, result.before, result.after, result.stage, result.progress, result.summary,
        result.fallback, result.error, result.estimated,
    ))
    return result


async def compact_if_needed(session: Session, used: int) -> Compaction | None:
    """Automatic compaction, before a model call. `used` may be an upper bound (the loop sizes
    the context with `tokens.bound_messages`, which never builds the tokenizer); only when it
    reaches the threshold is the context sized again (`over_threshold`) and compacted if that
    reaches it too."""
    if not await over_threshold(session, used):
        return None
    return await compact_session(session, reason="auto")


async def over_threshold(session: Session, used: int) -> bool:
    """Whether automatic compaction is due: `used` (an upper bound) reaches the threshold, and
    so does the provider's last report or the context's size (`LiveContext.over`: counted
    exactly in a worker thread, the bound then exact too; a loaded session never counted by
    a sampled estimate)."""
    if not needs_compaction(session, used):
        return False
    threshold = session.context_window * session.compact_threshold
    if not (session.context.last_usage >= threshold
            or await session.context.over(session.tool_definitions(), threshold)):
        return False
    return not session.context.stalled


def needs_compaction(session: Session, used: int) -> bool:
    """At `compact_threshold` of the window, unless the last try made no progress."""
    if used < session.context_window * session.compact_threshold:
        return False
    # No loop: after a compaction that made no progress, wait for the context to change.
    return not session.context.stalled


def describe(result: Compaction) -> str:
    """What /compact tells the user."""
    before, after = (figure(n, about) for n, about in
                     zip((result.before, result.after), result.estimated, strict=True))
    if not result.progress:
        return (f"Compaction stopped: it would only bring the context from {before} to "
                f"{after} tokens. Nothing was changed; consider /clear or a new session.")
    how = "deterministic trimming" if result.stage == 1 else "a summary of the earlier turns"
    text = f"Compacted the context from {before} to {after} tokens with {how}."
    if result.fallback:
        text += f" The summary model failed ({result.error}); a summary built from the transcript was used."
    return text
