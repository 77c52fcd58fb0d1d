"""ShareGPT lines in Hermes Agent's format (its `batch_runner.py` / `trajectories.jsonl`).

One line per trajectory:

    {"prompt_index", "conversations": [{"from", "value"}, ...],
     "metadata": {"model", "timestamp", "session_id", "usage"},
     "completed", "partial", "api_calls", "toolsets_used",
     "tool_stats": {tool: {count, success, failure}}, "tool_error_counts": {tool: failures},
     "subagents": [{"tool_call_id", "task", "goal", "status", "session_id",
                    "conversations", "subagents"}, ...]}

`conversations` as Hermes writes them (`run_agent._convert_to_trajectory_format`):

    system  the function-calling prompt, tool definitions inside <tools> ... </tools>
    human   a user message (each image as `<image>`)
    gpt     "<think>\\n{reasoning}\\n</think>\\n" (empty when none), the text, then one
            "<tool_call>\\n{"name", "arguments"}\\n</tool_call>" per call
    tool    every result of one model turn, "<tool_response>\\n{"tool_call_id", "name",
            "content"}\\n</tool_response>" blocks joined by newlines

`tool_stats` and `tool_error_counts` list every tool of the catalog (zeros when unused) so
every line has the same schema (HuggingFace `datasets` rejects lines that differ); for the
same reason `subagents` is on every line (empty without `delegate_task`). A subagent's work
reaches the parent's conversation as the `delegate_task` result (its summary); its own
conversation is its entry in `subagents`, nested the same way for its own subagents.
`parse_sharegpt` reads a line back into internal messages.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

from talaria.agent.trajectories.export.common import (
    ToolCatalog,
    run_header,
    subagent_runs,
)
from talaria.agent.trajectories.model import Trajectory, iso_time
from talaria.agent.transcript import (
    Message,
    calls_of,
    content_text,
    is_assistant,
    is_tool_result,
    is_user,
    last_assistant,
)

IMAGE = "<image>"

SYSTEM_PROMPT = (
    "You are a function calling AI model. You are provided with function signatures within "
    "<tools> </tools> XML tags. You may call one or more functions to assist with the user "
    "query. If available tools are not relevant in assisting with user query, just respond in "
    "natural conversational language. Don't make assumptions about what values to plug into "
    "functions. After calling & executing the functions, you will be provided with function "
    "results within <tool_response> </tool_response> XML tags. Here are the available tools:\n"
    "<tools>\n{tools}\n</tools>\n"
    "For each function call return a JSON object, with the following pydantic model json "
    "schema for each:\n"
    "{{'title': 'FunctionCall', 'type': 'object', 'properties': {{'name': {{'title': 'Name', "
    "'type': 'string'}}, 'arguments': {{'title': 'Arguments', 'type': 'object'}}}}, "
    "'required': ['name', 'arguments']}}\n"
    "Each function call should be enclosed within <tool_call> </tool_call> XML tags.\n"
    "Example:\n<tool_call>\n{{'name': <function-name>,'arguments': <args-dict>}}\n</tool_call>"
)

_THINK = re.compile(r"\A<think>\n(?:</think>|(?P<reasoning>.*?)\n</think>)\n?", re.DOTALL)
_TOOL_CALL = re.compile(r"^<tool_call>\n(.+)\n</tool_call>$", re.MULTILINE)
_TOOL_RESPONSE = re.compile(r"^<tool_response>\n(.+)\n</tool_response>$", re.MULTILINE)


def system_prompt(catalog: ToolCatalog) -> str:
    tools = [{"name": d["name"], "description": d.get("description", ""),
              "parameters": d.get("parameters", {}), "required": None}
             for d in catalog.definitions]
    return SYSTEM_PROMPT.format(tools=json.dumps(tools, ensure_ascii=False))


def to_sharegpt(traj: Trajectory, catalog: ToolCatalog, *, prompt_index: int = 0) -> dict[str, Any]:
    """One Hermes-compatible line (not yet redacted: `talaria.agent.trajectories.export.export` does that)."""
    stats = {name: {"count": 0, "success": 0, "failure": 0} for name in catalog.names}
    stats.update({name: dict(s) for name, s in traj.tool_stats.items()})
    toolsets = sorted({catalog.toolsets[n] for n in traj.tool_stats if n in catalog.toolsets})
    return {
        "prompt_index": prompt_index,
        "conversations": conversations(traj.messages, catalog),
        "metadata": {
            "model": traj.model,
            "timestamp": iso_time(traj.created_at if traj.created_at else _first(traj.times)),
            "session_id": traj.session_id,
            "usage": traj.totals(),
        },
        "completed": traj.completed,
        "partial": not traj.completed,
        "api_calls": traj.api_calls,
        "toolsets_used": toolsets,
        "tool_stats": stats,
        "tool_error_counts": {name: s["failure"] for name, s in stats.items()},
        "subagents": subagents(traj.messages, catalog),
    }


def subagents(messages: Any, catalog: ToolCatalog) -> list[dict[str, Any]]:
    """Each subagent's conversation, under the `delegate_task` call that started it."""
    return [{**run_header(call_id, run),
             "conversations": conversations(run.get("messages") or [], catalog),
             "subagents": subagents(run.get("messages") or [], catalog)}
            for call_id, run in subagent_runs(messages)]


def conversations(messages: tuple[Message, ...] | list[Message], catalog: ToolCatalog) -> list[dict[str, str]]:
    turns = [{"from": "system", "value": system_prompt(catalog)}]
    pending: list[str] = []  # tool responses of the current model turn
    for message in messages:
        if is_tool_result(message):
            pending.append(_tool_response(message))
            continue
        if pending:
            turns.append({"from": "tool", "value": "\n".join(pending)})
            pending = []
        if is_user(message):
            turns.append({"from": "human", "value": content_text(message.get("content"), IMAGE)})
        elif is_assistant(message):
            turns.append({"from": "gpt", "value": _gpt_value(message)})
        # The session's own system prompt is replaced by the function-calling one, as in Hermes.
    if pending:
        turns.append({"from": "tool", "value": "\n".join(pending)})
    return turns


def _gpt_value(message: Message) -> str:
    reasoning = (message.get("reasoning") or "").strip()
    value = f"<think>\n{reasoning}\n</think>\n" if reasoning else "<think>\n</think>\n"
    text = (message.get("content") or "").strip()
    calls = message.get("tool_calls") or []
    if not calls:
        return (value + text).strip()
    if text:
        value += text + "\n"
    for call in calls:
        body = {"name": call["name"], "arguments": _arguments(call.get("arguments"))}
        value += f"<tool_call>\n{json.dumps(body, ensure_ascii=False)}\n</tool_call>\n"
    return value.rstrip()


def _arguments(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw or {}
    try:
        return json.loads(raw or "{}")
    except ValueError:
        return raw  # kept verbatim: the model's invalid JSON is part of the record


def _tool_response(message: Message) -> str:
    content: Any = content_text(message.get("content"), IMAGE)
    if content.strip().startswith(("{", "[")):
        with contextlib.suppress(ValueError):  # not JSON after all: kept as text
            content = json.loads(content)
    body = {"tool_call_id": message.get("tool_call_id", ""), "name": message.get("name", ""),
            "content": content}
    return f"<tool_response>\n{json.dumps(body, ensure_ascii=False)}\n</tool_response>"


def parse_sharegpt(line: str | dict[str, Any]) -> list[Message]:
    """Internal messages from a ShareGPT line (its `conversations`, or the list itself).

    Tool call ids come from the tool responses that answer them (ShareGPT's <tool_call>
    blocks carry none); images come back as their `<image>` placeholder text.
    """
    data = json.loads(line) if isinstance(line, str) else line
    turns = data["conversations"] if isinstance(data, dict) else data
    messages: list[Message] = []
    for turn in turns:
        kind, value = turn["from"], turn.get("value") or ""
        if kind == "system":
            messages.append({"role": "system", "content": value})
        elif kind == "human":
            messages.append({"role": "user", "content": value})
        elif kind == "gpt":
            messages.append(_parse_gpt(value))
        elif kind == "tool":
            answered = _parse_tool(value)
            _link_ids(messages, answered)
            messages.extend(answered)
        else:
            raise ValueError(f"unknown ShareGPT turn {kind!r}")
    return messages


def _parse_gpt(value: str) -> Message:
    message: Message = {"role": "assistant"}
    think = _THINK.match(value)
    if think:
        if think.group("reasoning"):
            message["reasoning"] = think.group("reasoning")
        value = value[think.end():]
    calls = []
    for i, block in enumerate(_TOOL_CALL.findall(value)):
        body = json.loads(block)
        args = body.get("arguments", {})
        arguments = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        calls.append({"id": f"call_{i}", "name": body["name"], "arguments": arguments})
    message["content"] = _TOOL_CALL.sub("", value).strip()
    if calls:
        message["tool_calls"] = calls
    return message


def _parse_tool(value: str) -> list[Message]:
    results = []
    for block in _TOOL_RESPONSE.findall(value):
        body = json.loads(block)
        content = body.get("content")
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        results.append({"role": "tool", "tool_call_id": body.get("tool_call_id", ""),
                        "name": body.get("name", ""), "content": content})
    return results


def _link_ids(messages: list[Message], results: list[Message]) -> None:
    for call, result in zip(calls_of(last_assistant(messages) or {}), results, strict=False):
        if result["tool_call_id"]:
            call["id"] = result["tool_call_id"]


def _first(times: tuple[float | None, ...]) -> float | None:
    return next((t for t in times if t is not None), None)
