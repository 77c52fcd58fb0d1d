"""Agent events -> ACP `session/update` payloads (the `update` object), and tool content."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from talaria.agent import events as ev

if TYPE_CHECKING:
    from talaria.agent.permissions import PermissionAsk

PRIORITY = ("high", "medium", "low")
COST_DECIMALS = 6
"""A session's cost in dollars is sent to a millionth of a dollar."""
PLAN_STATUS = {"pending": "pending", "in_progress": "in_progress", "completed": "completed"}


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_content(item: dict[str, Any]) -> dict[str, Any]:
    """One agent content item (see talaria.agent.events) as ACP ToolCallContent."""
    if item["type"] == "diff":
        return {"type": "diff", "path": item["path"], "oldText": item.get("old_text"),
                "newText": item["new_text"]}
    if item["type"] == "terminal":
        return {"type": "terminal", "terminalId": item["terminal_id"]}
    return {"type": "content", "content": text_block(item.get("text", ""))}


def permission_tool_call(ask: PermissionAsk) -> dict[str, Any]:
    """The `toolCall` of a `session/request_permission`: the card being asked about, with the
    diff of an edit (so it can be judged before it is made) and any unusual reason to ask."""
    tool_call: dict[str, Any] = {"toolCallId": ask.tool_call_id, "title": ask.title, "kind": ask.kind}
    content = []
    if ask.diff is not None:
        content.append(tool_content({"type": "diff", **ask.diff}))
    if ask.reason not in ("edit", "command"):
        content.append(tool_content({"type": "text", "text": f"Asking because: {ask.reason}"}))
    if content:
        tool_call["content"] = content
    return tool_call


def locations(paths: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{"path": path} for path in paths]


def plan_entries(entries: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"content": str(e.get("content", "")),
         "priority": e.get("priority") if e.get("priority") in PRIORITY else "medium",
         "status": PLAN_STATUS.get(e.get("status", ""), "pending")}
        for e in entries
    ]


def iso(timestamp: float | None = None) -> str:
    """RFC 3339 UTC time (now when no timestamp is given)."""
    moment = datetime.now(UTC) if timestamp is None else datetime.fromtimestamp(timestamp, UTC)
    return moment.isoformat().replace("+00:00", "Z")


def to_update(event: ev.Event) -> dict[str, Any] | None:
    """The ACP update for an event, or None for events with no ACP form."""
    match event:
        case ev.TextChunk(text=text):
            return {"sessionUpdate": "agent_message_chunk", "content": text_block(text)}
        case ev.ThoughtChunk(text=text):
            return {"sessionUpdate": "agent_thought_chunk", "content": text_block(text)}
        case ev.ToolCallStarted():
            # A command's card is the command: its cwd as a location made clients label it
            # "Execute: /path/to/project" (CodeCompanion) or list it as a file (acpx).
            shown = () if event.kind == "execute" else event.locations
            return {"sessionUpdate": "tool_call", "toolCallId": event.id, "title": event.title,
                    "name": event.name, "kind": event.kind, "status": "pending",
                    "locations": locations(shown), "rawInput": event.raw_input}
        case ev.ToolCallUpdated(id=call_id, status=status, content=content):
            update: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": call_id}
            if status:
                update["status"] = status
            if content:
                update["content"] = [tool_content(c) for c in content]
            return update
        case ev.ToolCallFinished(id=call_id, status=status, content=content, result=result):
            # rawOutput: the result the model got, for clients that keep an observation
            # (Harbor's trajectory writer, log views); the content is what people look at.
            return {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": status,
                    "content": [tool_content(c) for c in content], "rawOutput": result}
        case ev.PlanUpdated(entries=entries):
            return {"sessionUpdate": "plan", "entries": plan_entries(entries)}
        case ev.UsageUpdated(used=used, size=size, cost_usd=cost):
            usage: dict[str, Any] = {"sessionUpdate": "usage_update", "used": used, "size": size}
            if cost is not None:  # unknown is left out: a made-up 0 would be a wrong figure
                usage["cost"] = {"amount": round(cost, COST_DECIMALS), "currency": "USD"}
            return usage
        case ev.TitleUpdated(title=title):
            return {"sessionUpdate": "session_info_update", "title": title, "updatedAt": iso()}
        case ev.Notice(text=text):
            return {"sessionUpdate": "agent_message_chunk", "content": text_block(f"\n> {text}\n")}
    return None


def notice(event: ev.Notice) -> dict[str, Any]:
    """The unstable ACP `notice` update (only for clients advertising `session.notices`)."""
    update: dict[str, Any] = {"sessionUpdate": "notice", "severity": event.severity,
                              "title": event.title}
    if event.text.strip() != event.title:
        update["description"] = event.text.strip()
    return update


STOP_REASONS = ("end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled")


def subagent_update(event: ev.SubagentChanged) -> dict[str, Any]:
    """The unstable ACP `subagent_update` (only for clients advertising `subagents`)."""
    state: dict[str, Any] = {"state": event.state}
    if event.state == "idle" and event.stop_reason in STOP_REASONS:
        state["stopReason"] = event.stop_reason
    return {"sessionUpdate": "subagent_update", "sessionId": event.id, "title": event.title,
            "description": event.description, "state": state,
            "_meta": {"talaria": {"toolCallId": event.card}}}


def summary_chunk(compaction_id: str, text: str) -> dict[str, Any]:
    """The unstable ACP `compaction_summary_chunk` (only for clients advertising
    `session.compaction`): a piece of a compaction's summary."""
    return {"sessionUpdate": "compaction_summary_chunk", "compactionId": compaction_id,
            "content": text_block(text)}


def compaction(event: ev.Compacted, *, client_supports: bool,
               streamed: str = "") -> list[dict[str, Any]]:
    """A compaction's updates. For clients that advertise `session.compaction`: its summary
    as a `compaction_summary_chunk` (unless it was `streamed` as it was written), then the
    `compaction_update` that ends it (with `summary` only where the final one replaces what was
    streamed: a fallback summary). Else one agent message chunk that says what happened."""
    if client_supports:
        updates = []
        summary = event.summary or ""
        if summary and not streamed:
            updates.append(summary_chunk(event.id, summary))
        update: dict[str, Any] = {
            "sessionUpdate": "compaction_update", "compactionId": event.id,
            "status": "completed" if event.applied else "failed",
            "_meta": {"talaria": {"beforeTokens": event.before, "afterTokens": event.after,
                                  "estimated": list(event.estimated),
                                  "stage": event.stage, "fallback": event.fallback}},
        }
        if summary and streamed and streamed.strip() != summary:
            update["summary"] = [text_block(summary)]
        before, after = event.figures()
        if event.error or not event.applied:
            update["error"] = event.error or (
                f"the context stays at {before} tokens: what compaction keeps whole "
                "(the system prompt, the first request, the latest turn) is nearly all of it")
        return [*updates, update]
    before, after = event.figures()
    if event.applied:
        text = f"\n> Compacted the context: {before} -> {after} tokens"
    else:  # issue 23: "2,281 -> 2,281 tokens" alone did not say why nothing changed
        text = (f"\n> Could not compact the context ({before} tokens): what compaction "
                "keeps whole (the system prompt, the first request, the latest turn) is nearly "
                "all of it")
    if event.fallback:
        text += " (the summary model failed; a summary built from the transcript was used)"
    return [{"sessionUpdate": "agent_message_chunk", "content": text_block(text + "\n")}]
