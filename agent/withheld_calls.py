"""The session's end of `talaria.agent.withheld`: marking tool results as they are stored.

The tool runner calls `mark` for every result it appends and `nested` for every call a
script makes; the delegator calls `absorb` when its subagents end.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from talaria.agent.transcript import ToolMessage
from talaria.agent.withheld import refused, secret_reached
from talaria.tools.redact import MAX_QUOTED_WORDS, WITHHELD, quoted_words

if TYPE_CHECKING:
    from talaria.agent.session import Session

PROCESS_TOOL = "process"
"""The tool that reads a background process's output by its id (`session_id`)."""


def _reason(session: Session, p: Any) -> str | None:
    sensitive = session.permissions.sensitive
    if sensitive is None or p.spec is None:
        return None
    return secret_reached(sensitive, session.cwd, p.paths, p.spec.command(p.args))


def nested(session: Session, parent: str, p: Any) -> None:
    """A call made inside call `parent` (a script's): its secret marks the outer call too."""
    session.withheld.record(p.id, _reason(session, p), parent)


def absorb(session: Session, call_id: str, children: list[Session]) -> None:
    """Subagents ran inside `call_id`: what any of them reached marks it (their summaries
    may quote it)."""
    for child in children:
        if child.withheld.reached is not None:
            session.withheld.record(call_id, child.withheld.reached)


def mark(session: Session, p: Any, message: ToolMessage) -> ToolMessage:
    """`message` (the result of `p`) marked `WITHHELD` when `p` reached a secret path, or a
    call it made did; a call refused before it ran holds nothing and stays as it is."""
    withholding = session.withheld
    reason = withholding.marks.pop(p.id, None) or _reason(session, p)
    if reason is None and p.name == PROCESS_TOOL:  # the output of a background command
        reason = withholding.processes.get(str(p.args.get("session_id")))
    for inner in [k for k, root in withholding.outer.items() if root == p.id]:
        withholding.outer.pop(inner)
        withholding.marks.pop(inner, None)
    if reason is None or refused(message):
        return message
    withholding.reached = withholding.reached or reason
    if (started := _background(message)) is not None:  # `process` reads its output later
        withholding.processes[started] = reason
    if len(withholding.quoted) < MAX_QUOTED_WORDS:
        withholding.quoted |= quoted_words([str(message.get("content") or "")])
    return {**message, WITHHELD: reason}


def _background(message: ToolMessage) -> str | None:
    """The id of the background process a result started (terminal(background=true))."""
    try:
        result = json.loads(str(message.get("content") or ""))
    except json.JSONDecodeError:
        return None
    if isinstance(result, dict) and result.get("status") == "running" and "pid" in result:
        return str(result.get("session_id"))
    return None
