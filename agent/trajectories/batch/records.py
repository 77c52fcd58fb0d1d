"""What a finished task becomes: one line of `trajectories.jsonl`.

A task's record (built here from its transcript) is

    {"task_id", "prompt_index" (the task's 0-based position in the tasks file), "prompt",
     "status": "completed" | "failed", "reason", "error",
     "messages": [transcript rows, see agent/transcript.py], "model", "turns",
     "tokens": {"input", "output", "cache_read", "cache_write", "reasoning"},
     "duration_s", "model_s", "tool_stats": {tool: {"calls", "failed"}},
     "attempt" (1-based), "agent": "talaria" | "oracle" | "nop", "tags",
     "toolsets": the toolsets label ("core", "core,web", or the `--toolset-mix` arm drawn),
     "skills": the skill set it ran with (`--skills NAME`), "none", or None (not given),
     "cost_usd": float | None (no price known for a model it used; see agent/pricing.py),
     "reward": float | None, "resolved": bool | None (None: the task has no check),
     "verifier": the check's verdict (verifier.py) without reward and resolved, or None,
     "ray_node"?: the Ray node that ran it (the Ray executor)}

and its line is a Hermes-compatible ShareGPT trajectory (`conversations`, `completed`,
`tool_stats` over every known tool, ...: see agent/export/sharegpt.py), secrets redacted,
plus the batch fields above except `messages` (`parse_sharegpt` gives them back) — so a
batch's output feeds `talaria trajectories compress` and training pipelines as it is.

`status` is "completed" only when the model ended its turn (`reason` "end_turn"); any other
end (`max_turn_requests`, `max_tokens`, `refusal`, `timeout`, `provider_error`,
`worker_crashed`, `setup_error`, `error`, `cost_limit`; with `--agent oracle`: `no_solution`,
`oracle_failed`) is "failed", with the partial trajectory kept. Whether the task was *solved*
is the verifier's `resolved`, never the status: a failed attempt is verified too.
`trajectory_line` is the one place that decides the line's shape (ShareGPT later).
"""

from __future__ import annotations

from collections.abc import Mapping
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
    turns = line["conversations"]
    # The system turn is the tool catalog's, the same on every line: redacted once, not per
    # line (it is most of a short line's text, and redaction was 90% of a line's cost).
    system = turns[0]["value"] if turns and turns[0].get("from") == "system" else None
    out = redact({**line, "conversations": turns[1:] if system is not None else turns, **batch})
    if system is not None:
        out["conversations"] = [{"from": "system", "value": _redacted_once(system)},
                                *out["conversations"]]
    return out


_CATALOG: list[Any] = []
_REDACTED: dict[str, str] = {}
MAX_REDACTED = 8
"""System turns kept redacted (one per set of tools a run uses)."""


def _redacted_once(text: str) -> str:
    from talaria.tools.redact import redact_text

    if text not in _REDACTED:
        if len(_REDACTED) >= MAX_REDACTED:
            _REDACTED.clear()
        _REDACTED[text] = redact_text(text)
    return _REDACTED[text]


def _catalog(cls: Any) -> Any:
    if not _CATALOG:
        _CATALOG.append(cls.builtin())
    return _CATALOG[0]


def summarize(messages: list[dict[str, Any]], prices: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Turns (model calls), token totals, their cost, time in the model and per-tool counts.
    Each call is priced at its own model's price; one unpriced call makes the cost None."""
    from talaria.agent.pricing import cost_usd, price_for

    totals = dict.fromkeys(TOKEN_KEYS, 0)
    tools: dict[str, dict[str, int]] = {}
    turns = 0
    model_ms = 0.0
    cost: float | None = 0.0
    for message in messages:
        if is_assistant(message) and "usage" in message:
            turns += 1
            model_ms += float(message.get("duration_ms") or 0)
            usage = message.get("usage") or {}
            for key in TOKEN_KEYS:
                totals[key] += int(usage.get(key) or 0)
            call = cost_usd({k.removesuffix("_tokens"): v for k, v in usage.items()},
                            price_for(message.get("model"), prices))
            cost = None if cost is None or call is None else cost + call
        elif is_tool_result(message):
            entry = tools.setdefault(str(message.get("name") or "?"), {"calls": 0, "failed": 0})
            entry["calls"] += 1
            entry["failed"] += message.get("status") == "failed"
    tokens = {key.removesuffix("_tokens"): value for key, value in totals.items()}
    return {"turns": turns, "tokens": tokens, "model_s": round(model_ms / 1000, 4),
            "tool_stats": tools, "cost_usd": round(cost, 6) if cost is not None else None}


def make_record(
    task: dict[str, Any], *, status: str, reason: str, error: str | None,
    messages: list[dict[str, Any]], model: str | None, duration_s: float,
    job: dict[str, Any] | None = None, verdict: dict[str, Any] | None = None,
    prices: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    if not any(m.get("role") == "user" for m in messages):
        # Failed before the prompt was stored (set-up, the environment, the first model call):
        # the trajectory still starts with what was asked (ShareGPT's human turn).
        messages = [{"role": "user", "content": task["prompt"]}, *messages]
    job = job or {}
    verifier = {k: v for k, v in verdict.items() if k not in ("reward", "resolved")} if verdict else None
    checked = bool(task.get("check"))
    return {
        "task_id": task["id"], "prompt_index": int(task.get("index") or 0),
        "prompt": task["prompt"], "attempt": int(job.get("attempt") or 1),
        "agent": job.get("agent") or "talaria", "status": status, "reason": reason,
        "error": error, "messages": messages, "model": model,
        "tags": list(task.get("tags") or ()), "toolsets": toolsets_label(task, job),
        "skills": job.get("skills"),
        **summarize(messages, prices), "duration_s": round(duration_s, 4),
        # A checked task whose check never ran (setup failed, worker died) is not solved.
        "reward": verdict["reward"] if verdict else (0.0 if checked else None),
        "resolved": verdict["resolved"] if verdict else (False if checked else None),
        "verifier": verifier,
    }


def toolsets_label(task: dict[str, Any], job: dict[str, Any]) -> str:
    """The toolsets a task ran with, as statistics group them ("core": the default; the arm
    of a `--toolset-mix` as written, e.g. "core-execute_code")."""
    if not task.get("toolsets") and job.get("toolset_arm"):
        return str(job["toolset_arm"])
    names = task.get("toolsets") or job.get("toolsets")
    return ",".join(names) if names else "core"


def attempt_key(record: dict[str, Any]) -> tuple[str, int]:
    """What a line stands for: its task and attempt (lines before attempts were 1)."""
    return str(record["task_id"]), int(record.get("attempt") or 1)
