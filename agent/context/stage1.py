"""Stage 1 of context compression: deterministic, free, and often enough on its own.

Outside the protected head and tail:
- identical tool outputs are deduplicated (the older copy points at the newer one);
- tool outputs are replaced by one-line summaries (`[terminal] ran "pytest" -> exit 1, 230 lines`);
- oversized tool-call arguments are shrunk while staying valid JSON;
- images in user messages are replaced by a placeholder, except the latest prompt's.
User and assistant text is never touched here: it carries the task and its constraints; the
latest prompt (the pending ask) is never touched at all.
"""

from __future__ import annotations

import json
from typing import Any

from talaria.agent.transcript import (
    Message,
    call_arguments,
    calls_of,
    is_prompt,
    is_tool_result,
    is_user,
)

ARGUMENT_LIMIT = 1_000
"""Characters of one tool-call argument string kept verbatim; longer ones are shrunk."""
ARGUMENT_KEEP = 300
LINE_LIMIT = 160
SUMMARY_PREFIX = "["


def shrink_arguments(arguments: str) -> str:
    """Shorten long string values inside a JSON object, keeping it valid JSON."""
    if len(arguments) <= ARGUMENT_LIMIT:
        return arguments
    try:
        data = json.loads(arguments)
    except json.JSONDecodeError:
        return json.dumps({"_shrunk": arguments[:ARGUMENT_KEEP], "_omitted_chars": len(arguments) - ARGUMENT_KEEP})
    if not isinstance(data, dict):
        return arguments
    for key, value in data.items():
        if isinstance(value, str) and len(value) > ARGUMENT_KEEP:
            data[key] = f"{value[:ARGUMENT_KEEP]}…[{len(value) - ARGUMENT_KEEP} chars omitted]"
    return json.dumps(data, ensure_ascii=False)


def _clip(text: str, limit: int = LINE_LIMIT) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def one_line(name: str, args: dict[str, Any], content: str) -> str:
    """A one-line stand-in for an old tool result."""
    try:
        result = json.loads(content)
    except json.JSONDecodeError:
        result = None
    if not isinstance(result, dict):
        return f"[{name}] -> {len(content)} chars of output"
    if "error" in result:
        return f"[{name}] {_clip(args.get('path') or args.get('command') or '', 60)} error: {_clip(result['error'])}"
    path = result.get("path") or args.get("path", "")
    match name:
        case "terminal":
            output = str(result.get("output", ""))
            lines = output.count("\n") + (1 if output and not output.endswith("\n") else 0)
            text = f'[terminal] ran "{_clip(args.get("command", ""), 80)}" -> exit {result.get("exit_code")}, {lines} lines'
            if result.get("exit_code") not in (0, None) and output.strip():
                text += f'; last line: "{_clip(output.strip().splitlines()[-1], 120)}"'
            return text + (" (timed out)" if result.get("timed_out") else "")
        case "read_file":
            shown = str(result.get("content", "")).count("\n") + 1 if result.get("content") else 0
            start = int(args.get("offset", 1) or 1)
            return f"[read_file] read {path} lines {start}-{start + shown - 1} of {result.get('total_lines')}"
        case "search_files":
            return f'[search_files] "{_clip(args.get("pattern", ""), 60)}" -> {result.get("total", 0)} matches'
        case "write_file":
            return f"[write_file] wrote {path} ({result.get('bytes_written')} bytes)"
        case "patch":
            return f"[patch] patched {path} ({result.get('replacements')} replacement(s))"
        case "todo":
            todos = result.get("todos") or []
            open_items = [t.get("content", "") for t in todos if t.get("status") != "completed"]
            return f"[todo] {len(todos)} items; open: " + _clip("; ".join(open_items) or "none")
    return f"[{name}] -> {len(content)} chars of output"


def stage1(messages: list[Message], start: int, end: int) -> list[Message]:
    """A copy of `messages` with messages[start:end] reduced as described above."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    for message in messages:
        for call in calls_of(message):
            calls[call["id"]] = (call["name"], call_arguments(call))
    later_outputs: dict[str, int] = {}
    for index, message in enumerate(messages):
        if is_tool_result(message):
            later_outputs[message.get("content", "")] = index
    ask = max((i for i, m in enumerate(messages) if is_prompt(m)), default=-1)
    out = list(messages)
    for index in range(start, end):
        message = messages[index]
        if is_tool_result(message) and not str(message.get("content", "")).startswith(SUMMARY_PREFIX):
            name, args = calls.get(message.get("tool_call_id", ""), (message.get("name", "tool"), {}))
            content = message.get("content", "")
            if later_outputs.get(content, index) > index and len(content) > 80:
                text = f"[{name}] same output as a later {name} call"
            else:
                text = one_line(name, args, content)
            out[index] = {**message, "content": text}
        elif calls_of(message):
            out[index] = {**message, "tool_calls": [
                {**call, "arguments": shrink_arguments(call.get("arguments") or "{}")}
                for call in message["tool_calls"]
            ]}
        elif is_user(message) and isinstance(message.get("content"), list) and index != ask:
            parts = [p if p.get("type") == "text" else {"type": "text", "text": "[image omitted]"}
                     for p in message["content"]]
            out[index] = {**message, "content": parts}
    return out
