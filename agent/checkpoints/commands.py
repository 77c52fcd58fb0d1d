"""`/undo`, `/checkpoints`, `/restore N` for a session, and the listing `talaria checkpoints` prints."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from talaria.agent.checkpoints.journal import Checkpoint, Journal
from talaria.agent.checkpoints.restore import restore, undo
from talaria.agent.checkpoints.shadow import CheckpointError
from talaria.agent.checkpoints.turns import TurnCheckpoints

if TYPE_CHECKING:
    from talaria.agent.session import Session

LISTED = 20
"""Checkpoints `/checkpoints` shows (the newest); `talaria checkpoints list --all` shows all."""
FILES_SHOWN = 5


async def checkpoint_command(session: Session, name: str, arg: str) -> str:
    """Run `/undo`, `/checkpoints` or `/restore N`; bad input raises CheckpointError (its
    message is the command's reply) before anything changes."""
    checkpoints = session.checkpoints
    if not isinstance(checkpoints, TurnCheckpoints):  # None: off; a subagent's: not its own
        raise CheckpointError(f"/{name}: checkpoints are off in this session "
                              "(TALARIA_CHECKPOINTS=false or --no-checkpoints)")
    if name == "checkpoints" and arg:
        raise CheckpointError("/checkpoints takes no argument; /restore N restores one")
    if name == "undo" and arg:
        raise CheckpointError("/undo takes no argument; /restore N goes back further")
    if name == "restore" and not arg.strip().isdigit():
        raise CheckpointError("/restore needs a checkpoint number, e.g. /restore 3 "
                              "(/checkpoints lists them)")
    try:
        if name == "checkpoints":
            return describe(checkpoints.journal.load(), limit=LISTED)
        if name == "undo":
            return await undo(checkpoints.repo, checkpoints.journal, session.id, session.workspace)
        return await restore(checkpoints.repo, checkpoints.journal, int(arg), session.workspace,
                             session.id)
    except CheckpointError as exc:
        raise CheckpointError(f"/{name}: {exc}") from None


SESSION_HINT = ("/restore N puts the files back as they were before checkpoint N; "
                "/undo undoes this session's last turn.")
CLI_HINT = "talaria checkpoints restore N puts the files back as they were before checkpoint N."
GAPS = ("Missing numbers: a turn that changed no file keeps no checkpoint, and only the latest "
        "checkpoints are kept; numbers are never reused.")


def describe(checkpoints: list[Checkpoint], *, limit: int | None = None,
             hint: str = SESSION_HINT) -> str:
    """One block per checkpoint, newest first: number, age, kind, prompt, changed files."""
    if not checkpoints:
        return "No checkpoints yet: one is taken before each turn that changes files."
    shown = list(reversed(checkpoints))[:limit]
    lines = []
    for c in shown:
        what = "turn" if c.kind == "turn" else "restore"
        flags = " (undone)" if c.undone else ""
        lines.append(f"{c.number}. {_age(c.created_at)} ago, {what}{flags}: {c.prompt or '-'}")
        paths = c.paths
        named = ", ".join(paths[:FILES_SHOWN]) + (
            f" and {len(paths) - FILES_SHOWN} more" if len(paths) > FILES_SHOWN else "")
        lines.append(f"   {len(paths)} file(s): {named}" if paths else "   (still running)")
        if c.skipped:
            lines.append(f"   not checkpointed: {', '.join(c.skipped)}")
    if limit is not None and len(checkpoints) > limit:
        lines.append(f"… {len(checkpoints) - limit} older (talaria checkpoints list --all)")
    numbers = [c.number for c in shown]
    hidden = limit is not None and len(checkpoints) > limit  # said on the line above
    if max(numbers) - min(numbers) + 1 > len(numbers) or not hidden and min(numbers) > 1:
        lines.append(GAPS)
    lines.append(hint)
    return "\n".join(lines)


def _age(when: float) -> str:
    seconds = max(0, int(time.time() - when))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


__all__ = ["Journal", "checkpoint_command", "describe"]
