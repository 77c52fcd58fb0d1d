"""Permission policies for `AcpClient`: how `session/request_permission` gets its answer.

A policy is `async (params) -> optionId | None`: `params` is the request (`sessionId`,
`toolCall{toolCallId, title, kind, content?}`, `options[{optionId, name, kind}]`); None answers
`cancelled`. `AcpClient` asks one question at a time, and cancels a pending policy call when the
turn is cancelled.

`ask_on_terminal` (and `TerminalAsker`, which also remembers what it could not ask) puts the
question on the controlling terminal, with the diff of an edit (a `{"type": "diff"}` item of
the tool call's content) shown before the question.
"""

from __future__ import annotations

import difflib
import os
from typing import Any

import anyio

KEYS = {"allow_once": "y", "allow_always": "a", "reject_once": "n", "reject_always": "N"}
MAX_DIFF_LINES = 80
"""Diff lines shown with a question; the rest are counted, not printed."""
MAX_LINE_CHARS = 240
"""Characters shown of one diff line (a minified file must not flood the terminal)."""
MAX_ANSWER_BYTES = 4096
"""A typed line longer than this is no answer: the call is rejected."""
COLORS = {"+": "\x1b[32m", "-": "\x1b[31m", "@": "\x1b[36m"}
RESET = "\x1b[0m"


def pick(params: dict[str, Any], *kinds: str) -> str | None:
    """The id of the first option of the first of `kinds` offered, or None."""
    options = [o for o in params.get("options") or () if isinstance(o, dict)]
    for kind in kinds:
        for option in options:
            if option.get("kind") == kind and isinstance(option.get("optionId"), str):
                return option["optionId"]
    return None


def is_question(params: dict[str, Any]) -> bool:
    """A `clarify` question asked as a permission (its options are answers, not allow/reject)."""
    call = params.get("toolCall")
    meta = call.get("_meta") if isinstance(call, dict) else None
    ours = meta.get("talaria") if isinstance(meta, dict) else None
    return isinstance(ours, dict) and ours.get("question") is True


async def allow_all(params: dict[str, Any]) -> str | None:
    """Allow every tool call, once at a time (`talaria run --yes`). A question is skipped:
    allowing tool calls is not answering for the user (the model goes on without it)."""
    if is_question(params):
        return pick(params, "reject_once", "reject_always")
    return pick(params, "allow_once", "allow_always")


async def reject_all(params: dict[str, Any]) -> str | None:
    """Reject every tool call that asks."""
    return pick(params, "reject_once", "reject_always")


class TerminalAsker:
    """Asks the person at the controlling terminal (`/dev/tty`, so it works while stdin and
    stdout are pipes). Without a terminal it rejects, and keeps the rejected call in `unasked`
    (tool call id -> title) so the caller can say why and how to allow it."""

    def __init__(self, *, color: bool | None = None) -> None:
        self.unasked: dict[str, str] = {}
        self.kinds: dict[str, str] = {}
        """Tool call id -> its ACP kind, or "unusual" when asked for a reason of its own."""
        self.color = color
        self._lock = anyio.Lock()  # calls running in parallel ask one question at a time

    async def __call__(self, params: dict[str, Any]) -> str | None:
        async with self._lock:
            answer = await self._ask(params)
        if answer is None:
            call = params.get("toolCall") or {}
            call_id = str(call.get("toolCallId", ""))
            self.unasked[call_id] = str(call.get("title") or call_id or "a tool call")
            self.kinds[call_id] = "unusual" if _reason(call) else str(call.get("kind") or "other")
            return pick(params, "reject_once", "reject_always")
        options = [o for o in params.get("options") or () if isinstance(o, dict)]
        numbered = is_question(params)  # its answers share a kind: only numbers tell them apart
        for i, option in enumerate(options, 1):
            if answer == str(i) or not numbered and answer == KEYS.get(option.get("kind", "")):
                return option.get("optionId")
        return pick(params, "reject_once", "reject_always")

    async def _ask(self, params: dict[str, Any]) -> str | None:
        """The typed answer ("" for none), or None when there is no terminal to ask on."""
        try:  # as getpass does; O_NOCTTY: never become this terminal's controlling process
            fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
        except OSError:
            return None
        try:
            color = self.color if self.color is not None else _wants_color()
            _write_all(fd, question(params, color=color).encode("utf-8", "replace"))
            return await _read_line(fd)
        except OSError:  # the terminal hung up while asking: no answer
            return ""
        finally:
            os.close(fd)


def _reason(call: dict[str, Any]) -> bool:
    """Whether the call is asked about for a reason of its own (outside the project, a
    secret): the agent says so in a text item (`Asking because: ...`)."""
    return any(isinstance(item, dict) and isinstance(item.get("content"), dict)
               and str(item["content"].get("text", "")).startswith("Asking because:")
               for item in call.get("content") or ())


async def ask_on_terminal(params: dict[str, Any]) -> str | None:
    """Ask the person at the controlling terminal; without a terminal, reject."""
    return await TerminalAsker()(params)


def question(params: dict[str, Any], *, color: bool = False) -> str:
    """The text put on the terminal: the call's title, its diff and notes, then the menu."""
    call = params.get("toolCall") or {}
    options = [o for o in params.get("options") or () if isinstance(o, dict)]
    asked = is_question(params)
    title = call.get("title") or call.get("toolCallId") or "this tool call"
    lines = [f"Question: {title}" if asked else f"Allow {title}?"]
    for item in call.get("content") or ():
        if not isinstance(item, dict):
            continue
        if item.get("type") == "diff":
            lines += ["  " + _paint(line, color) for line in diff_lines(item)]
        elif item.get("type") == "content" and isinstance(item.get("content"), dict) \
                and isinstance(item["content"].get("text"), str):
            lines.append(f"  {item['content']['text']}")
    menu = "  ".join(f"[{i if asked else KEYS.get(o.get('kind', ''), i)}] "
                     f"{o.get('name', o.get('optionId'))}" for i, o in enumerate(options, 1))
    return "\n" + "\n".join(lines) + f"\n  {menu}\n> "


def diff_lines(item: dict[str, Any]) -> list[str]:
    """An ACP diff item as unified diff lines, at most MAX_DIFF_LINES (then a count)."""
    path = str(item.get("path", ""))
    old, new = item.get("oldText"), item.get("newText")
    new_lines = str(new or "").splitlines()
    if old is None:
        body = [f"new file {path}"] + [f"+{line}" for line in new_lines]
    else:
        body = list(difflib.unified_diff(str(old).splitlines(), new_lines, path, path, lineterm=""))
        if not body:
            body = [f"{path}: no change"]
    shown = [line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " …"
             for line in body[:MAX_DIFF_LINES]]
    if len(body) > MAX_DIFF_LINES:
        shown.append(f"… {len(body) - MAX_DIFF_LINES} more diff lines")
    return shown


def _paint(line: str, color: bool) -> str:
    if not color or line.startswith(("+++", "---")) or line[:1] not in COLORS:
        return line
    return f"{COLORS[line[0]]}{line}{RESET}"


def _wants_color() -> bool:
    return "NO_COLOR" not in os.environ and os.environ.get("TERM", "dumb") != "dumb"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


async def _read_line(fd: int) -> str:
    """One line typed at the terminal, read without blocking the event loop (a cancelled or
    interrupted question leaves no thread behind waiting for a key)."""
    data = b""
    while b"\n" not in data and len(data) <= MAX_ANSWER_BYTES:
        await anyio.wait_readable(fd)
        chunk = os.read(fd, MAX_ANSWER_BYTES + 1)
        if not chunk:  # Ctrl-D, or the terminal went away: no answer
            break
        data += chunk
    line = data.split(b"\n", 1)[0]
    return "" if len(line) > MAX_ANSWER_BYTES else line.decode("utf-8", "replace").strip()
