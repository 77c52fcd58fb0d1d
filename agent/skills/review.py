"""The background review: after a turn's answer is delivered, a forked agent looks back at the
conversation and asks "should a skill or a memory be saved or updated?".

`after_turn(session, config)` brings the counters up to date (tool calls since the last skill
write; user turns since the last memory write) and, when one crosses its threshold
(`skill_review_interval`, `memory_review_interval`), returns the review to run once the
response is out — the front door runs it (ACP: after the `session/prompt` answer is written)
and the user's next prompt never waits for it. The review works on a snapshot of the
transcript in a session of its own: same model by default; with `review_model`, that model
and a compact digest instead of the full replay.

Its tools are `REVIEW_TOOLS`, enforced at dispatch (`Session.allowed_tools`): any other call
is refused and logged. It waits until no turn of its session is running (the user's turns
come first), never asks the user anything, is bounded by `REVIEW_MAX_CALLS` model
calls and `REVIEW_TIMEOUT_S`, is cancelled when its session closes, and its errors are logged,
never shown as turn failures. What it did reaches the user as notices ("Saved skill `x`"), and
its messages are recorded in the session's transcript as a `review` event row.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

import anyio

from talaria.agent.config import Config
from talaria.agent.door import LocalDoor
from talaria.agent.events import Notice
from talaria.agent.loop import run_turn
from talaria.agent.runtime import Opening, make_provider, new_session
from talaria.agent.session import Session
from talaria.agent.transcript import (
    Message,
    ReviewEvent,
    calls_of,
    is_assistant,
    is_prompt,
    is_system,
    is_tool_result,
    is_user,
    text_of,
)

log = logging.getLogger(__name__)

REVIEW_TOOLS = ("skills_list", "skill_view", "skill_manage", "memory", "read_file", "search_files")
REVIEW_MAX_CALLS = 8
REVIEW_TIMEOUT_S = 180.0
IDLE_POLL_S = 0.05
"""The review starts once no turn of its session is running, checked this often: the user's
turns come first (a user who answers at once is not slowed by a review on the same loop)."""
DIGEST_CHARS = 12_000
"""Characters of the digest a separate review model gets instead of the full replay."""
DIGEST_ITEM_CHARS = 400

SKILL_ASK = """\
- Skills: was there a non-trivial procedure here worth repeating (a multi-step fix, a \
workflow the user corrected, a trick found by trial and error)? If a listed skill covers it, \
skill_view it and patch it with what was learned. Otherwise create ONE focused skill: a clear \
name, a description saying when to use it, and checked steps. Do not save one-off facts, \
secrets, or anything already covered."""
MEMORY_ASK = """\
- Memory: did you learn durable facts about the user (preferences, role, how they like to \
work) or the environment (tools, conventions, commands)? Save them with the memory tool \
(target user or memory), one short entry each; replace stale entries instead of adding \
near-copies."""
REVIEW_PROMPT = """\
[Background review — the user does not see this.] Look back at the conversation above.
{asks}
Only save what will help in future sessions. If nothing is worth saving, reply \
"Nothing to save." and stop."""


Review = Callable[[], Awaitable[None]]


def after_turn(session: Session, config: Config) -> Review | None:
    """Update the counters for the turn that just ended; the review to run, if one is due."""
    skills, memory = session.tool_state.skills, session.tool_state.memory
    if skills is None or memory is None:
        return None
    calls = _turn_calls(session.messages)
    if skills.writes != skills.seen_writes[0]:  # a skill was written this turn: count after it
        last = max((i for i, name in enumerate(calls) if name == "skill_manage"), default=-1)
        skills.tool_calls_since_write = len(calls) - last - 1
    else:
        skills.tool_calls_since_write += len(calls)
    skills.turns_since_memory = 0 if memory.writes != skills.seen_writes[1] \
        else skills.turns_since_memory + 1
    skills.seen_writes = (skills.writes, memory.writes)
    want_skill = skills.tool_calls_since_write >= config.skill_review_interval
    want_memory = skills.turns_since_memory >= config.memory_review_interval
    if not skills.review or skills.reviewing or not (want_skill or want_memory):
        return None
    if session.permissions.mode == "plan":  # read-only: no notes now; the counters wait
        return None
    if config.review_model is None and session.provider.name.startswith("replay:"):
        return None  # a recording plays one conversation: a review would take its next turns
    # The counters restart now: the same work is not reviewed twice.
    if want_skill:
        skills.tool_calls_since_write = 0
    if want_memory:
        skills.turns_since_memory = 0
    skills.reviewing = True
    snapshot = list(session.messages)

    async def review() -> None:
        try:
            await run_review(session, config, snapshot, skill=want_skill, memory=want_memory)
        finally:
            skills.reviewing = False

    return review


async def run_review(session: Session, config: Config, snapshot: list[Message], *,
                     skill: bool, memory: bool) -> list[str]:
    """Run one review on `snapshot`; returns what it changed (also sent as notices)."""
    fork: Session | None = None
    start = 0
    scope = anyio.CancelScope()
    session.tool_state.cleanups["review"] = scope.cancel  # closing the session stops it
    try:
        with scope, anyio.move_on_after(REVIEW_TIMEOUT_S):
            while session.cancel_scope is not None:  # a turn is running: it goes first
                await anyio.sleep(IDLE_POLL_S)
            if session.permissions.mode == "plan":  # switched while it waited: read-only
                return []
            fork, start = _fork(session, config, snapshot)
            asks = "\n".join(a for a, on in ((SKILL_ASK, skill), (MEMORY_ASK, memory)) if on)
            await run_turn(fork, REVIEW_PROMPT.format(asks=asks))
    except Exception:  # the user's turn is done and fine: a failed review is only logged
        log.warning("background review of session %s failed", session.id, exc_info=True)
    finally:
        session.tool_state.cleanups.pop("review", None)
    if fork is None:
        return []
    changes = _changes(fork)
    with anyio.CancelScope(shield=True):
        _record(session, fork, start, changes)
        if changes and session.tool_state.skills and session.tool_state.skills.on_change:
            session.tool_state.skills.on_change()
        try:
            # Closed while it ran: what was saved stays saved, but a closed session hears nothing.
            for text in changes if not scope.cancel_called else ():
                await session.door.emit(Notice(text))
        except Exception:  # the editor went away: what was saved stays saved
            log.info("could not tell the user what the review of %s saved", session.id)
    return changes


def _fork(session: Session, config: Config, snapshot: list[Message]) -> tuple[Session, int]:
    """A session of its own for the review (whitelisted tools, no questions, no store), and
    where its own messages will start."""
    door = LocalDoor(session.workspace)  # events dropped, questions refused
    if config.review_model:
        provider, history = make_provider(config, config.review_model), digest(snapshot)
    else:
        provider, history = session.provider, list(snapshot)
    opening = Opening(session.cwd, session.additional_dirs, session_id=f"{session.id}-review",
                      mode="dont_ask",
                      tool_names=REVIEW_TOOLS, history=history,
                      allowed_tools=frozenset(REVIEW_TOOLS))
    fork = new_session(replace(config, max_turns=REVIEW_MAX_CALLS), opening, door=door,
                       provider=provider, store=None)
    assert fork.tool_state.skills is not None
    fork.tool_state.skills.actor = "review"
    return fork, len(fork.messages)


def digest(messages: list[Message]) -> list[Message]:
    """A compact replay for another model: the system prompt, then one user message with the
    conversation's text and tool calls, each item cut to DIGEST_ITEM_CHARS, the whole kept
    to the last DIGEST_CHARS."""
    lines = []
    for m in messages[1:]:
        if (is_user(m) or is_assistant(m)) and (said := text_of(m, sep=" ")):
            lines.append(f"{m['role']}: {_cut(said)}")
        for call in calls_of(m):
            lines.append(f"tool call {call['name']}({_cut(str(call.get('arguments')))})")
        if is_tool_result(m):
            lines.append(f"result of {m.get('name')}: {_cut(text_of(m, sep=' '))}")
    body = "\n".join(lines)[-DIGEST_CHARS:]
    system = messages[:1] if messages and is_system(messages[0]) else []
    return [*system, {"role": "user", "content": f"Digest of the conversation so far:\n{body}"},
            {"role": "assistant", "content": "Noted."}]


def _changes(fork: Session) -> list[str]:
    state = fork.tool_state
    return [*(state.skills.changes if state.skills else ()), *(state.memory.changes if state.memory else ())]


def _record(session: Session, fork: Session, start: int, changes: list[str]) -> None:
    """The review's messages in the session's transcript, as an event row marked review (event
    rows stay out of the model's context and of `session/load` replays)."""
    if session.store is None:
        return
    try:
        event: ReviewEvent = {
            "role": "event", "type": "review", "model": fork.provider.name, "changes": changes,
            "messages": json.loads(json.dumps(fork.messages[start:], default=str)),
        }
        session.store.append(session.id, event)
    except Exception:
        log.warning("could not record the review of session %s", session.id, exc_info=True)


def _turn_calls(messages: Sequence[Message]) -> list[str]:
    """Names of the tool calls made since the last user message (a tool's image is mid-turn)."""
    names: list[str] = []
    for m in reversed(messages):
        if is_prompt(m):
            break
        names[:0] = [c["name"] for c in calls_of(m)]
    return names


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= DIGEST_ITEM_CHARS else text[:DIGEST_ITEM_CHARS] + "…"
