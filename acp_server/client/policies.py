"""Permission policies for `AcpClient`: how `session/request_permission` gets its answer.

A policy is `async (params) -> optionId | None`: `params` is the request (`sessionId`,
`toolCall{toolCallId, title, kind, content?}`, `options[{optionId, name, kind}]`); None answers
`cancelled`. `AcpClient` asks one question at a time, and cancels a pending policy call when the
turn is cancelled.
"""

from __future__ import annotations

import io
import os
from typing import Any

import anyio

KEYS = {"allow_once": "y", "allow_always": "a", "reject_once": "n", "reject_always": "N"}


def pick(params: dict[str, Any], *kinds: str) -> str | None:
    """The id of the first option of the first of `kinds` offered, or None."""
    options = [o for o in params.get("options") or () if isinstance(o, dict)]
    for kind in kinds:
        for option in options:
            if option.get("kind") == kind and isinstance(option.get("optionId"), str):
                return option["optionId"]
    return None


async def allow_all(params: dict[str, Any]) -> str | None:
    """Allow every tool call, once at a time (`talaria run --yes`)."""
    return pick(params, "allow_once", "allow_always")


async def reject_all(params: dict[str, Any]) -> str | None:
    """Reject every tool call that asks."""
    return pick(params, "reject_once", "reject_always")


async def ask_on_terminal(params: dict[str, Any]) -> str | None:
    """Ask the person at the controlling terminal (`/dev/tty`, so it works while stdin and
    stdout are pipes); without a terminal, reject."""
    return await anyio.to_thread.run_sync(_ask_tty, params, abandon_on_cancel=True)


def _ask_tty(params: dict[str, Any]) -> str | None:
    options = [o for o in params.get("options") or () if isinstance(o, dict)]
    try:  # as getpass does: a buffered "r+" would need a seekable file
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return pick(params, "reject_once", "reject_always")
    tty = io.TextIOWrapper(io.FileIO(fd, "w+"), encoding="utf-8", errors="replace")
    call = params.get("toolCall") or {}
    notes = [c["content"]["text"] for c in call.get("content") or ()
             if isinstance(c, dict) and isinstance(c.get("content"), dict)
             and isinstance(c["content"].get("text"), str)]
    menu = "  ".join(f"[{KEYS.get(o.get('kind', ''), i)}] {o.get('name', o.get('optionId'))}"
                     for i, o in enumerate(options, 1))
    with tty:
        tty.write(f"\nAllow {call.get('title') or call.get('toolCallId') or 'this tool call'}?\n")
        for note in notes:
            tty.write(f"  {note}\n")
        tty.write(f"  {menu}\n> ")
        tty.flush()
        answer = tty.readline().strip()
    for i, option in enumerate(options, 1):
        if answer in (KEYS.get(option.get("kind", "")), str(i)):
            return option.get("optionId")
    return pick(params, "reject_once", "reject_always")
