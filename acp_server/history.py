"""Replay a stored transcript as ACP `session/update`s (for `session/load`).

Tool calls are replayed once each, with their final status and content; live terminal ids
are never replayed (the terminal is gone), the command's output is shown as text instead. A
stored row that could not be read (`talaria.agent.store_rows`) is a notice in its place.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from talaria.acp_server.updates import compaction, locations, plan_entries, text_block, tool_content
from talaria.agent import heap
from talaria.agent.events import Compacted, stored_estimated
from talaria.agent.store_rows import UNREADABLE
from talaria.agent.transcript import (
    Message,
    call_arguments,
    calls_of,
    is_assistant,
    is_event,
    is_prompt,
    is_user,
    results_by_call,
)
from talaria.tools.registry import ToolSpec

if TYPE_CHECKING:
    from talaria.agent.store import Store

log = logging.getLogger(__name__)

PAGE_ROWS = 100
"""Transcript rows read from the store at a time while replaying: what a page's texts freed
stays a hole in the heap among the loaded context's (500 rows: ~0.6 MB more at 20,000)."""


async def replay(store: Store, session_id: str, tools: dict[str, ToolSpec],
                 send: Callable[[dict[str, Any]], Awaitable[None]], *,
                 compaction_updates: bool = False) -> None:
    """Send a stored session's updates, reading its transcript a page at a time: held whole,
    a 20,000-message transcript was ~30 MB more at the peak of `session/load`, and most of
    it stayed with the process. A turn is replayed once the next one starts (its results
    follow its calls); SQLite's cache and the heap's free pages go back to the system at the
    end."""
    seq, turn = 0, list[Message]()

    async def flush(messages: list[Message]) -> None:
        for update in replay_updates(messages, tools, compaction_updates=compaction_updates):
            await send(update)
            # A send that has room returns without yielding: ten 1 MB prompts replayed back to
            # back held every other request of the editor for their whole encoding (0.24 s).
            await anyio.lowlevel.checkpoint()

    while page := await anyio.to_thread.run_sync(store.messages_after, session_id, seq, PAGE_ROWS):
        seq = page[-1][0]
        for _, message in page:
            if message.get("role") == "assistant" and turn:
                await flush(turn)
                turn = []
            turn.append(message)
    await flush(turn)
    turn, page = [], []  # the last page and turn go before the heap is trimmed
    await anyio.to_thread.run_sync(_trim_heap, store)  # it walks the whole heap: not on the loop


def _trim_heap(store: Store) -> None:
    """SQLite keeps the pages a replay read (up to its 2 MB cache) and glibc the memory freed
    since: both handed back."""
    store.release_memory()
    heap.trim()


def replay_updates(
    messages: list[Message], tools: dict[str, ToolSpec], *, compaction_updates: bool = False
) -> Iterator[dict[str, Any]]:
    """`compaction_updates`: the client advertised `session.compaction` (else a notice)."""
    results = results_by_call(messages)
    for message in messages:
        if is_event(message) and message.get("type") == "compaction":
            event = Compacted(
                str(message.get("id", "")), int(message.get("before_tokens") or 0),
                int(message.get("after_tokens") or 0), int(message.get("stage") or 1),
                bool(message.get("applied")), message.get("summary"),
                bool(message.get("fallback")), message.get("error"), stored_estimated(message),
            )
            yield from compaction(event, client_supports=compaction_updates)
        elif is_event(message) and message.get("type") == UNREADABLE:  # the rest loads
            text = (f"\n> Stored message {message.get('seq')} of this session could not be read "
                    f"and is left out: {message.get('error')}.\n")
            yield {"sessionUpdate": "agent_message_chunk", "content": text_block(text)}
        elif is_user(message) and message.get("process_note"):  # shown live as a notice
            first = str(message.get("content") or "").strip("[]").splitlines()[0:1]
            yield {"sessionUpdate": "agent_message_chunk", "content": text_block(f"\n> {''.join(first)}\n")}
        elif is_prompt(message):  # not a tool's image: its card shows the call
            yield from _user(message.get("content"))
        elif is_assistant(message):
            if message.get("reasoning"):
                yield {"sessionUpdate": "agent_thought_chunk", "content": text_block(message["reasoning"])}
            if message.get("content"):
                yield {"sessionUpdate": "agent_message_chunk", "content": text_block(message["content"])}
            for call in calls_of(message):
                yield _tool_call(call, results.get(call["id"]), tools.get(call["name"]))
                if call["name"] == "todo" and (plan := _plan(results.get(call["id"]))) is not None:
                    yield {"sessionUpdate": "plan", "entries": plan}


def _user(content: Any) -> Iterator[dict[str, Any]]:
    if isinstance(content, str):
        yield {"sessionUpdate": "user_message_chunk", "content": text_block(content)}
        return
    for part in content or ():
        if part.get("type") == "text":
            yield {"sessionUpdate": "user_message_chunk", "content": text_block(part["text"])}
        elif part.get("type") == "image":
            yield {"sessionUpdate": "user_message_chunk",
                   "content": {"type": "image", "mimeType": part["mime_type"], "data": part["data"]}}


def _tool_call(call: dict[str, Any], result: Message | None, spec: ToolSpec | None) -> dict[str, Any]:
    args = call_arguments(call)
    update: dict[str, Any] = {
        "sessionUpdate": "tool_call", "toolCallId": call["id"],
        "title": spec.call_title(args) if spec else call["name"],
        "kind": spec.call_kind(args) if spec else "other",
        "status": (result or {}).get("status", "failed"), "rawInput": args,
    }
    if paths := (result or {}).get("locations"):
        update["locations"] = locations(tuple(paths))
    display = (result or {}).get("display") or [{"type": "text", "text": "No result was recorded."}]
    update["content"] = [tool_content(_no_live_terminal(item, result)) for item in display]
    return update


def _no_live_terminal(item: dict[str, Any], result: Message | None) -> dict[str, Any]:
    if item.get("type") != "terminal":
        return item
    try:
        output = json.loads((result or {}).get("content") or "{}").get("output", "")
    except (json.JSONDecodeError, AttributeError):
        output = ""
    return {"type": "text", "text": output or "(terminal output not recorded)"}


def _plan(result: Message | None) -> list[dict[str, Any]] | None:
    try:
        data = json.loads((result or {}).get("content") or "")
    except json.JSONDecodeError:
        return None
    todos = data.get("todos") if isinstance(data, dict) else None
    if not isinstance(todos, list):
        return None
    # As live (tools/todo.py): cancelled items are not shown as plan entries.
    return plan_entries([t for t in todos if isinstance(t, dict) and t.get("status") != "cancelled"])

