"""What a finished task becomes: one line of `trajectories.jsonl`.

A task's record (built here from its transcript) is

    {"task_id", "prompt_index" (the task's 0-based position in the tasks file), "prompt",
     "status": "completed" | "failed", "reason", "error",
     "messages": [transcript rows, see agent/transcript.py], "model", "turns",
     "tokens": {"input", "output", "cache_read", "cache_write", "reasoning"},
     "duration_s", "model_s", "tool_stats": {tool: {"calls", "failed"}}}

and its line is a Hermes-compatible ShareGPT trajectory (`conversations`, `completed`,
`tool_stats` over every known tool, ...: see agent/export/sharegpt.py), secrets redacted,
plus the batch fields above except `messages` (`parse_sharegpt` gives them back) — so a
batch's output feeds `talaria trajectories compress` and training pipelines as it is.

`status` is "completed" only when the model ended its turn (`reason` "end_turn"); any other
end (`max_turn_requests`, `max_tokens`, `refusal`, `timeout`, `provider_error`,
`worker_crashed`, `setup_error`, `error`) is "failed", with the partial trajectory kept.
`trajectory_line` is the one place that decides the line's shape (ShareGPT later).
"""

from __future__ import annotations

from typing import Any

from talaria.agent.transcript import is_assistant, is_tool_result

TOKEN_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
              "reasoning_tokens")


def trajectory_line(record: dict[str, Any]) -> dict[str, Any]:
    """The ShareGPT line written for a finished task."""
    from talaria.agent.trajectories.export.common import ToolCatalog
    from talaria.agent.trajectories.export.sharegpt import to_sharegpt
    from talaria.agent.trajectories.model import build
    from talaria.tools.redact import redact

    traj = build(record["messages"], None, session_id=record["task_id"], model=record.get("model"))
    line = to_sharegpt(traj, _catalog(ToolCatalog), prompt_index=int(record.get("prompt_index") or 0))
    batch = {k: v for k, v in record.items() if k not in ("messages", "tool_stats")}
    return redact({**line, **batch})


_CATALOG: list[Any] = []


def _catalog(cls: Any) -> Any:
    if not _CATALOG:
        _CATALOG.append(cls.builtin())
    return _CATALOG[0]


def summarize(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Turns (model calls), token totals, time in the model and per-tool counts."""
    totals = dict.fromkeys(TOKEN_KEYS, 0)
    tools: dict[str, dict[str, int]] = {}
    turns = 0
    model_ms = 0.0
    for message in messages:
        if is_assistant(message) and "usage" in message:
            turns += 1
            model_ms += float(message.get("duration_ms") or 0)
            for key in TOKEN_KEYS:
                totals[key] += int((message.get("usage") or {}).get(key) or 0)
        elif is_tool_result(message):
            entry = tools.setdefault(str(message.get("name") or "?"), {"calls": 0, "failed": 0})
            entry["calls"] += 1
            entry["failed"] += message.get("status") == "failed"
    tokens = {key.removesuffix("_tokens"): value for key, value in totals.items()}
    return {"turns": turns, "tokens": tokens, "model_s": round(model_ms / 1000, 4),
            "tool_stats": tools}


def make_record(
    task: dict[str, Any], *, status: str, reason: str, error: str | None,
    messages: list[dict[str, Any]], model: str | None, duration_s: float,
) -> dict[str, Any]:
    if not any(m.get("role") == "user" for m in messages):
        # Failed before the prompt was stored (set-up, the environment, the first model call):
        # the trajectory still starts with what was asked (ShareGPT's human turn).
        messages = [{"role": "user", "content": task["prompt"]}, *messages]
    return {
        "task_id": task["id"], "prompt_index": int(task.get("index") or 0),
        "prompt": task["prompt"], "status": status, "reason": reason,
        "error": error, "messages": messages, "model": model,
        **summarize(messages), "duration_s": round(duration_s, 4),
    }
