"""The transcript record: every row the agent writes, typed, and the readers the code shares.

A session's transcript (the store's `messages` table, a transcript file, the live context) is
a list of JSON objects, one per row. The rows the agent writes are the `TypedDict`s below: the
four the model is sent (system, user, assistant, tool: the internal shape every provider
adapter translates, close to OpenAI Chat Completions) and the event rows that belong to the
transcript only (compaction, review). A key not declared here is a key nobody reads back:
`tests/agent/test_transcript.py` runs real turns and fails on any row with one.

What is read back (the store, a file, another tool's transcript) is a `Message`: any JSON
object, perhaps written by an older Talaria; the readers take either and never assume a key.

    SystemMessage   {role: "system", content}
    UserMessage     {role: "user", content: str | [TextPart | ImagePart],
                     steer?, process_note?, tool_image?}
    AssistantMessage {role: "assistant", content, reasoning?, thinking_blocks?,
                     tool_calls?: [ToolCall], usage?, model?, duration_ms?, interrupted?}
    ToolMessage     {role: "tool", tool_call_id, name, content, status, display,
                     locations?, subagents?: [SubagentRun], withheld?}
    CompactionEvent {role: "event", type: "compaction", ...}
    ReviewEvent     {role: "event", type: "review", model, changes, messages}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, NotRequired, TypedDict, cast

Message = dict[str, Any]
"""A transcript row as stored and read back: one of the rows below, or one from elsewhere."""


class TextPart(TypedDict):
    type: Literal["text"]
    text: str


class ImagePart(TypedDict):
    type: Literal["image"]
    mime_type: str
    data: str
    """Base64."""


class SystemMessage(TypedDict):
    role: Literal["system"]
    content: str


class UserMessage(TypedDict):
    role: Literal["user"]
    content: str | list[dict[str, Any]]
    """Text, or parts: each a `TextPart` or an `ImagePart` (front doors build them)."""
    steer: NotRequired[bool]
    """A `/steer` note the user sent while the turn ran."""
    process_note: NotRequired[bool]
    """A background process ended (the model asked to hear of it); not the user's words."""
    tool_image: NotRequired[str]
    """An image a tool call (this id) attached for the model to see; not a prompt."""


class ToolCall(TypedDict):
    id: str
    name: str
    arguments: str
    """JSON text, exactly as the model produced it (`call_arguments` reads it)."""


class CallUsage(TypedDict):
    """Token counts of one model call (`providers.base.Usage`)."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    reasoning_tokens: int


class AssistantExtras(TypedDict, total=False):
    """What a provider keeps in its assistant message for the next call."""

    thinking_blocks: list[dict[str, Any]]
    """Anthropic's thinking blocks, with their signatures."""


class AssistantMessage(AssistantExtras):
    role: Literal["assistant"]
    content: str
    reasoning: NotRequired[str]
    tool_calls: NotRequired[list[ToolCall]]
    usage: NotRequired[CallUsage]
    model: NotRequired[str]
    """"provider:model" that answered."""
    duration_ms: NotRequired[float]
    interrupted: NotRequired[bool]
    """Cut short (cancelled while it streamed): what had come, kept."""


class SubagentRun(TypedDict):
    """A subagent's transcript, filed under the `delegate_task` result that started it."""

    task: int
    goal: str
    status: str
    session_id: str | None
    messages: list[Message]


class ToolMessage(TypedDict):
    role: Literal["tool"]
    tool_call_id: str
    name: str
    content: str
    """The result the model sees (JSON)."""
    status: Literal["completed", "failed"]
    display: NotRequired[list[dict[str, Any]]]
    """What a front door shows of it (ACP tool call content: text, diff, terminal); stored
    always, left out of a loaded live context (only the replay reads it, from the transcript)."""
    locations: NotRequired[list[str]]
    """The paths the call acted on."""
    subagents: NotRequired[list[SubagentRun]]
    withheld: NotRequired[str]
    """The secret path its content came from (`agent.withheld`; the store's column)."""


class CompactionEvent(TypedDict):
    role: Literal["event"]
    type: Literal["compaction"]
    id: str
    reason: str
    """manual, auto or overflow."""
    stage: int
    before_tokens: int
    after_tokens: int
    applied: bool
    fallback: bool
    error: str | None
    dropped: list[int]
    """(start, end) of the messages it replaced."""
    summary: str | None
    estimated: NotRequired[list[bool]]
    """Whether before_tokens and after_tokens are estimates (absent before it was kept)."""


class ReviewEvent(TypedDict):
    role: Literal["event"]
    type: Literal["review"]
    model: str
    changes: list[str]
    messages: list[Message]
    """The review's own model calls and tool results."""


ContextRow = SystemMessage | UserMessage | AssistantMessage | ToolMessage
"""A row the model is sent (the live context holds these)."""
EventRow = CompactionEvent | ReviewEvent
"""A row of the transcript only."""


def plain(row: ContextRow | EventRow) -> Message:
    """A typed row as the plain JSON object it is (the same dict: no copy)."""
    return cast(Message, row)


# Readers: they take a written row or one read back, and assume no key.

def is_system(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "system"


def is_user(message: Mapping[str, Any]) -> bool:
    """A user message: a prompt, a steer or process note, an image a tool attached."""
    return message.get("role") == "user"


def is_prompt(message: Mapping[str, Any]) -> bool:
    """A user message that starts or steers a turn: not an image a tool attached mid-turn."""
    return message.get("role") == "user" and not message.get("tool_image")


def is_assistant(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "assistant"


def is_answer(message: Mapping[str, Any]) -> bool:
    """An assistant message that ends its turn: it calls no tool and was not cut short."""
    return is_assistant(message) and not message.get("tool_calls") and not message.get("interrupted")


def is_tool_result(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "tool"


def is_event(message: Mapping[str, Any]) -> bool:
    """A row of the transcript only (compaction, review): never sent to the model."""
    return message.get("role") == "event"


def context_rows(rows: Iterable[Message]) -> list[Message]:
    """`rows` without the event rows."""
    return [row for row in rows if not is_event(row)]


def calls_of(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tool calls of an assistant message ([] for any other row)."""
    return message.get("tool_calls") or []


def call_arguments(call: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of a recorded tool call as a dict; {} when the model sent bad JSON."""
    try:
        args = json.loads(call.get("arguments") or "{}")
    except json.JSONDecodeError:
        return {}
    return args if isinstance(args, dict) else {}


def results_by_call(messages: Iterable[Message]) -> dict[str, Message]:
    """Each tool result under the id of the call it answers."""
    return {str(m.get("tool_call_id")): m for m in messages if is_tool_result(m)}


def last_assistant(messages: Sequence[Message]) -> Message | None:
    return next((m for m in reversed(messages) if is_assistant(m)), None)


def content_text(content: Any, image: str | None = None, sep: str = "\n") -> str:
    """A content as text: a string as it is; of parts, the texts joined by `sep`, each other
    part (an image) as `image` (None: left out). A part that is not an object raises
    AttributeError: a malformed row (exports name the trajectory it came from)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else str(content)
    texts = (str(part.get("text", "")) if part.get("type") == "text" else image for part in content)
    return sep.join(text for text in texts if text is not None)


def text_of(message: Mapping[str, Any], image: str | None = None, sep: str = "\n") -> str:
    """The text of a message's content (`content_text`)."""
    return content_text(message.get("content"), image, sep)
