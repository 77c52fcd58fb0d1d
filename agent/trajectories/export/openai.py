"""A trajectory as OpenAI Chat Completions takes it: one line `{"messages", "tools"}`.

That is also the shape of OpenAI's chat fine-tuning JSONL. Messages carry only wire fields:

    {"role": "system" | "user", "content": str | [{"type": "text", "text"},
                                                 {"type": "image_url", "image_url": {"url"}}]}
    {"role": "assistant", "content": str | None,
     "tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}]}
    {"role": "tool", "tool_call_id", "content": str}

A trajectory with subagents (`delegate_task`) adds `"subagents": [{"tool_call_id", "task",
"goal", "status", "session_id", "messages", "subagents"}]`, each subagent's own conversation
in the same wire form; lines without subagents are unchanged.

Internal keys (usage, model, reasoning, status, display, ...) are dropped; images become
`data:` URLs. Tool messages take text only, so images a tool returned follow that model
turn's results as one user message (the usual workaround; OpenAI rejects anything between
an assistant's tool calls and their results).
"""

from __future__ import annotations

from typing import Any

from talaria.agent.trajectories.export.common import (
    ToolCatalog,
    images,
    run_header,
    subagent_runs,
)
from talaria.agent.trajectories.model import Trajectory
from talaria.agent.transcript import Message, content_text


def to_openai(traj: Trajectory, catalog: ToolCatalog) -> dict[str, Any]:
    """One line (not yet redacted: `talaria.agent.trajectories.export.export` does that)."""
    line: dict[str, Any] = {"messages": wire_messages(traj.messages), "tools": wire_tools(catalog)}
    if runs := subagents(traj.messages):
        line["subagents"] = runs
    return line


def subagents(messages: Any) -> list[dict[str, Any]]:
    return [{**run_header(call_id, run), "messages": wire_messages(run.get("messages") or []),
             "subagents": subagents(run.get("messages") or [])}
            for call_id, run in subagent_runs(messages)]


def wire_tools(catalog: ToolCatalog) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {
            "name": d["name"], "description": d.get("description", ""),
            "parameters": d.get("parameters") or {"type": "object", "properties": {}},
        }}
        for d in catalog.definitions
    ]


def wire_messages(messages: tuple[Message, ...] | list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    tool_images: list[dict[str, Any]] = []  # images returned by the current turn's tools
    for message in messages:
        role = message.get("role")
        if role != "tool" and tool_images:
            out.append({"role": "user", "content": tool_images})
            tool_images = []
        if role in ("system", "user"):
            out.append({"role": role, "content": _content(message.get("content"))})
        elif role == "assistant":
            out.append(_assistant(message))
        elif role == "tool":
            content = message.get("content")
            out.append({"role": "tool", "tool_call_id": message.get("tool_call_id", ""),
                        "content": content_text(content, "[image]")})
            if found := images(content):
                tool_images.append({"type": "text", "text": (
                    f"Image(s) returned by tool call {message.get('tool_call_id', '')}:")})
                tool_images.extend(_image_part(part) for part in found)
    if tool_images:
        out.append({"role": "user", "content": tool_images})
    return out


def _assistant(message: Message) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
    if calls := message.get("tool_calls"):
        wire["content"] = message.get("content") or None
        wire["tool_calls"] = [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": c.get("arguments") or "{}"}}
            for c in calls
        ]
    return wire


def _content(content: Any) -> str | list[dict[str, Any]]:
    if not isinstance(content, list):
        return content if isinstance(content, str) else ""
    return [
        _image_part(part) if part.get("type") == "image"
        else {"type": "text", "text": part.get("text", "")}
        for part in content
    ]


def _image_part(part: dict[str, Any]) -> dict[str, Any]:
    url = f"data:{part.get('mime_type', 'image/png')};base64,{part.get('data', '')}"
    return {"type": "image_url", "image_url": {"url": url}}
