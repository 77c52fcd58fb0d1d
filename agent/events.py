"""Typed events the loop emits; front doors translate them into their protocol.

Tool-call content items are plain dicts in one of three shapes:
    {"type": "text", "text": str}
    {"type": "diff", "path": str (absolute), "old_text": str | None, "new_text": str}
    {"type": "terminal", "terminal_id": str}
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class TextChunk:
    text: str


@dataclass(frozen=True, slots=True)
class ThoughtChunk:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    id: str
    name: str
    title: str
    kind: str
    locations: tuple[str, ...]
    raw_input: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCallUpdated:
    """Status change (`in_progress`) or intermediate content (a terminal to embed)."""

    id: str
    status: str | None = None
    content: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    id: str
    status: str  # "completed" | "failed"
    content: tuple[dict[str, Any], ...]
    result: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PlanUpdated:
    entries: tuple[dict[str, Any], ...]  # {content, priority, status}


@dataclass(frozen=True, slots=True)
class UsageUpdated:
    used: int
    """Tokens of context in use after the last model call."""
    size: int
    """The model's context window."""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None
    """The session's cost so far in US dollars (`Session.spend`); None when unknown (a model
    without a price, a call that reported no usage)."""


@dataclass(frozen=True, slots=True)
class TitleUpdated:
    title: str


NOTICE_TITLE_CHARS = 80
"""A notice's title: its first sentence, cut to this many characters."""


@dataclass(frozen=True, slots=True)
class Notice:
    """A message for the user that is not model output (retries, fallbacks, warnings).
    Doors whose client shows notices apart from the answer (ACP `session.notices`) send it as
    one, with `severity` and a title; elsewhere it joins the answer's text, unless `quiet`:
    then it is only logged (a note nobody needs in the answer, e.g. that no checkpoint was
    taken, which a recorder would otherwise take for the model's words)."""

    text: str
    severity: str = "info"
    """info | warning | error."""
    quiet: bool = False

    @property
    def title(self) -> str:
        first = self.text.strip().split(". ")[0].split("\n")[0].rstrip(".")
        cut = first if len(first) <= NOTICE_TITLE_CHARS else first[: NOTICE_TITLE_CHARS - 1] + "…"
        return cut or "Talaria"


@dataclass(frozen=True, slots=True)
class Compacted:
    """The context was compacted (or a compaction was attempted and made no progress)."""

    id: str
    before: int
    after: int
    stage: int
    applied: bool
    summary: str | None = None
    fallback: bool = False
    error: str | None = None
    estimated: tuple[bool, bool] = (False, False)
    """Whether `before` and `after` are estimates (texts never counted, a new summary)."""

    def figures(self) -> tuple[str, str]:
        """`before` and `after` as a person reads them: "about 31,000" for an estimate."""
        return figure(self.before, self.estimated[0]), figure(self.after, self.estimated[1])


def figure(tokens: int, estimated: bool) -> str:
    """A token count for people: "about " before an estimate."""
    return f"about {tokens:,}" if estimated else f"{tokens:,}"


def stored_estimated(stored: Mapping[str, Any]) -> tuple[bool, bool]:
    """A stored compaction event's (`transcript.CompactionEvent`) `estimated` pair; one stored
    before it was kept: (False, False)."""
    pair = stored.get("estimated")
    if isinstance(pair, list) and len(pair) == 2:
        return bool(pair[0]), bool(pair[1])
    return False, False


def figures(stored: Mapping[str, Any]) -> tuple[str, str]:
    """A stored compaction event's before and after, as `Compacted.figures` gives them."""
    about = stored_estimated(stored)
    return (figure(int(stored.get("before_tokens") or 0), about[0]),
            figure(int(stored.get("after_tokens") or 0), about[1]))


@dataclass(frozen=True, slots=True)
class CompactionText:
    """A piece of a compaction's summary as the summary model writes it; the `Compacted` of
    the same `id` follows with the whole summary (which may differ: trimmed, or a fallback)."""

    id: str
    text: str


@dataclass(frozen=True, slots=True)
class OptionChanged:
    """A session option (mode, model, reasoning_effort, exec_mode) took a new value."""

    option: str
    value: str


@dataclass(frozen=True, slots=True)
class SubagentChanged:
    """A subagent started (`running`) or ended (`idle`, with its stop reason); its progress
    and summary are on its tool card (`card`), which every front door shows."""

    id: str
    """The subagent's session id."""
    card: str
    title: str
    description: str
    state: str  # "running" | "idle"
    stop_reason: str | None = None


Event = (
    TextChunk
    | ThoughtChunk
    | ToolCallStarted
    | ToolCallUpdated
    | ToolCallFinished
    | PlanUpdated
    | UsageUpdated
    | TitleUpdated
    | Notice
    | Compacted
    | CompactionText
    | OptionChanged
    | SubagentChanged
)
Emit = Callable[[Event], Awaitable[None]]


def event_to_dict(event: Event) -> dict[str, Any]:
    """JSON-ready form: {"type": "tool_call_started", ...fields}."""
    name = type(event).__name__
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")
    return {"type": snake, **{k: getattr(event, k) for k in event.__slots__}}
