"""What tools hand to the layer above them: a question for the user (`clarify`), tasks for
subagents (`delegate_task`) and images for a model (`vision_analyze`). Tools cannot ask an
editor, build a session or call a model, so the runtime puts the callables that can into
`ToolState` (`clarify`, `delegate`, `vision`); these are their types.
Imports nothing of ours, so `ToolState` can name them without a circle through the tools.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    choices: tuple[str, ...]
    tool_call_id: str
    """The `clarify` call's card, which the question belongs to."""


@dataclass(frozen=True, slots=True)
class Answer:
    text: str | None
    """The user's answer; None when there is none (then `note` says why)."""
    note: str = ""
    cancelled: bool = False
    """The user cancelled the question: the turn ends `cancelled`."""


Clarifier = Callable[[Question], Awaitable[Answer]]


@dataclass(frozen=True, slots=True)
class Task:
    goal: str
    context: str = ""
    toolsets: tuple[str, ...] | None = None
    """Toolsets or tool names this subagent may use (None: the default subagent set)."""


@dataclass(frozen=True, slots=True)
class DelegateRequest:
    tasks: tuple[Task, ...]
    tool_call_id: str
    """The `delegate_task` card; each subagent's own card is shown under it."""


Delegate = Callable[[DelegateRequest], Awaitable[dict[str, Any]]]


Describer = Callable[[str, str, str], Awaitable[str]]
"""(mime type, base64 data, question) -> what the auxiliary vision model answers; raises a
ToolError when the model cannot be reached or fails."""


@dataclass(frozen=True, slots=True)
class Vision:
    """What `vision_analyze` may do with an image in this session."""

    sees: Callable[[], bool]
    """Whether the session's model takes images now (it can change with the model)."""
    describe: Describer | None = None
    """The auxiliary `vision_model`; None: not configured."""
    model: str | None = None
    """That model's name, for results and messages."""
    allow: tuple[str, ...] = ()
    """Networks beyond the public internet image URLs may come from (web_allow_networks)."""
