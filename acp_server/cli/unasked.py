"""What `talaria run` says when tool calls were refused for want of a terminal to ask on: which
ones, and only the flags that would have allowed them (issue 28: `--mode accept_edits` allows
no command, and suggesting the mode the user passed helps nobody).

A call's ACP kind says what it does: edits (`edit`, `delete`, `move`) run unasked in
`accept_edits` and `auto`, commands (`execute`) in `auto` (sandboxed); anything else that asks,
or a call asked about for an unusual reason (outside the project, a secret), asks in every
mode but `bypass`, which `--yes` is."""

from __future__ import annotations

from collections.abc import Mapping

MAX_TITLES = 3
"""Titles of refused calls named in the message; the rest are counted."""
UNUSUAL = "unusual"
"""The kind noted for a call asked about for a reason of its own (`Asking because: ...`)."""
MODES = {"edit": ("accept_edits", "auto"), "delete": ("accept_edits", "auto"),
         "move": ("accept_edits", "auto"), "execute": ("auto",)}
"""Modes in which a call of that kind, in the project, needs no question."""
WHAT = {"accept_edits": "edits in the project", "auto": "edits in the project, commands sandboxed"}


def unasked_message(unasked: Mapping[str, str], kinds: Mapping[str, str] | None = None,
                    mode: str | None = None) -> str:
    """One line: what was refused (`unasked`: call id -> title), and how to allow it, given
    each call's kind and the `--mode` the run had."""
    titles = list(unasked.values())
    named = ", ".join(titles[:MAX_TITLES])
    if len(titles) > MAX_TITLES:
        named += f" and {len(titles) - MAX_TITLES} more"
    if len(titles) == 1:
        what, refused, them = named, "it was refused", "it"
    else:
        what, refused, them = f"{len(titles)} tool calls ({named})", "they were refused", "them"
    ways = ["--yes (every tool call)"]
    ways += [f"--mode {m} ({WHAT[m]})" for m in allowing(unasked, kinds or {}) if m != mode]
    how = ways[0] if len(ways) == 1 else ", ".join(ways[:-1]) + " or " + ways[-1]
    return (f"talaria: {what} needed permission and there was no terminal to ask on, so {refused}. "
            f"Allow {them} with {how}.")


def allowing(unasked: Mapping[str, str], kinds: Mapping[str, str]) -> list[str]:
    """The modes that run every refused call without a question (in MODES order)."""
    modes = ["accept_edits", "auto"]
    for call_id in unasked:
        modes = [m for m in modes if m in MODES.get(kinds.get(call_id, UNUSUAL), ())]
    return modes
