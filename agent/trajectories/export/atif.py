"""A trajectory as an ATIF document: the Agent Trajectory Interchange Format, ATIF-v1.4.

Spec: Harbor RFC 0001 "Agent Trajectory Interchange Format (ATIF) Specification", v1.4
(https://github.com/laude-institute/harbor/blob/main/docs/rfcs/0001-trajectory-format.md,
also https://harborframework.com/docs/trajectory-format). v1.4 is the version whose full text
we follow field by field; later versions only add optional fields.

    {schema_version: "ATIF-v1.4", session_id, agent: {name, version, model_name},
     notes, steps: [...], final_metrics: {total_prompt_tokens, total_completion_tokens,
     total_cached_tokens, total_steps, extra}, extra}

    step: {step_id (1, 2, ...), timestamp (ISO 8601), source: system | user | agent,
           message, and for agent steps only: model_name, reasoning_content,
           tool_calls: [{tool_call_id, function_name, arguments (an object)}],
           observation: {results: [{source_call_id, content}]},
           metrics: {prompt_tokens (cached included), completion_tokens, cached_tokens,
                     extra: {reasoning_tokens, cache_creation_input_tokens}}; extra}

Mapping: each model call is one agent step, its tool results that step's observation.
Compaction events are system steps whose observation holds the summary (v1.2 allows
observations on system steps "for context management"). `message` is a string in v1.4, so
images are `[image]` in the text and their data sits in the step's `extra.images`.
Arguments that are not a JSON object become `{}` with the raw text in
`extra.invalid_arguments`. A `delegate_task` step's subagents are whole ATIF documents of
their own in its `extra.subagents` (with tool_call_id, task, goal, status).
"""

from __future__ import annotations

import json
from importlib import metadata
from typing import Any

from talaria.agent.trajectories.export.common import (
    images,
    run_header,
    subagent_runs,
)
from talaria.agent.trajectories.model import Trajectory, TurnUsage, build, iso_time
from talaria.agent.transcript import Message, content_text, is_tool_result

SCHEMA_VERSION = "ATIF-v1.4"
SOURCE_KEYS = ("prompt_index", "task_id", "status", "reason", "error")
"""Fields of a source line (a batch's trajectories.jsonl) kept in the document's `extra`."""
AGENT_NAME = "talaria"
NOTES = ("Exported by Talaria. Each agent step is one model call; its observation holds that "
         "call's tool results. Compaction events are system steps. Images are [image] in "
         "message text, with their data in the step's extra.images.")


def to_atif(traj: Trajectory, *, agent_version: str | None = None) -> dict[str, Any]:
    """One ATIF document (not yet redacted: `talaria.agent.trajectories.export.export` does that)."""
    steps = _steps(traj)
    totals = traj.totals()
    return {
        "schema_version": SCHEMA_VERSION,
        "session_id": traj.session_id,
        "agent": {"name": AGENT_NAME, "version": agent_version or _version(),
                  "model_name": traj.model},
        "notes": NOTES,
        "steps": steps,
        "final_metrics": {
            "total_prompt_tokens": totals["input_tokens"],
            "total_completion_tokens": totals["output_tokens"],
            "total_cached_tokens": totals["cache_read_tokens"],
            "total_steps": len(steps),
            "extra": {"total_reasoning_tokens": totals["reasoning_tokens"],
                      "total_cache_creation_input_tokens": totals["cache_write_tokens"],
                      "api_calls": traj.api_calls, "duration_ms": traj.duration_ms(),
                      "tool_stats": traj.tool_stats},
        },
        "extra": {"completion_status": traj.status, "title": traj.title, "cwd": traj.cwd,
                  "mode": traj.mode,
                  **{key: traj.extra[key] for key in SOURCE_KEYS if traj.extra.get(key) is not None}},
    }


def _steps(traj: Trajectory) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    usage = {t.index: t for t in traj.turns}
    events = sorted(traj.compactions, key=lambda e: e["at"])
    messages = traj.messages
    i = 0
    while i < len(messages) or events:
        while events and (i >= len(messages) or events[0]["at"] <= i):
            steps.append(_compaction(events.pop(0)))
        if i >= len(messages):
            break
        message, when = messages[i], traj.times[i]
        role = message.get("role")
        if role == "assistant":
            j = i + 1
            while j < len(messages) and is_tool_result(messages[j]):
                j += 1
            steps.append(_agent(message, messages[i + 1:j], usage.get(i), when))
            i = j
            continue
        if role in ("system", "user"):
            step = {"source": role, "timestamp": iso_time(when),
                    "message": content_text(message.get("content"), "[image]")}
            if found := images(message.get("content")):
                step["extra"] = {"images": [_image(part) for part in found]}
            steps.append(step)
        i += 1  # a tool result without its call (cannot happen in a valid transcript)
    return [_number(n, step) for n, step in enumerate(steps, start=1)]


def _agent(message: Message, results: tuple[Message, ...], usage: TurnUsage | None,
           when: float | None) -> dict[str, Any]:
    step: dict[str, Any] = {"source": "agent", "timestamp": iso_time(when),
                            "model_name": message.get("model"),
                            "message": message.get("content") or ""}
    extra: dict[str, Any] = {}
    if message.get("reasoning"):
        step["reasoning_content"] = message["reasoning"]
    calls = message.get("tool_calls") or []
    if calls:
        step["tool_calls"] = [_tool_call(call, extra) for call in calls]
    ids = {call["id"] for call in calls}
    if results:
        step["observation"] = {"results": [_result(r, ids) for r in results]}
        extra["tool_status"] = {r.get("tool_call_id"): r.get("status") for r in results
                                if r.get("status")}
        found = [_image(p) | {"source_call_id": r.get("tool_call_id")}
                 for r in results for p in images(r.get("content"))]
        if found:
            extra["images"] = found
        if runs := subagent_runs(results):  # delegate_task: each subagent as its own document
            extra["subagents"] = [
                {**run_header(call_id, run), "trajectory": to_atif(build(
                    run.get("messages") or [], None,
                    session_id=str(run.get("session_id") or f"{call_id}-{run.get('task')}")))}
                for call_id, run in runs]
    if "usage" in message and usage is not None:
        step["metrics"] = _metrics(usage)
    if usage is not None and usage.duration_ms is not None:
        extra["duration_ms"] = usage.duration_ms
    if message.get("interrupted"):
        extra["interrupted"] = True
    if extra:
        step["extra"] = extra
    return step


def _result(result: Message, ids: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if result.get("tool_call_id") in ids:  # the validator checks every id against the step's calls
        out["source_call_id"] = result["tool_call_id"]
    out["content"] = content_text(result.get("content"), "[image]")
    return out


def _tool_call(call: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    raw = call.get("arguments") or "{}"
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        extra.setdefault("invalid_arguments", {})[call["id"]] = raw
        arguments = {}
    return {"tool_call_id": call["id"], "function_name": call["name"], "arguments": arguments}


def _metrics(usage: TurnUsage) -> dict[str, Any]:
    metrics: dict[str, Any] = {"prompt_tokens": usage.input_tokens,
                               "completion_tokens": usage.output_tokens,
                               "cached_tokens": usage.cache_read_tokens}
    extra = {"reasoning_tokens": usage.reasoning_tokens,
             "cache_creation_input_tokens": usage.cache_write_tokens}
    if any(extra.values()):
        metrics["extra"] = {k: v for k, v in extra.items() if v}
    return metrics


def _compaction(event: dict[str, Any]) -> dict[str, Any]:
    before, after = event.get("before_tokens") or 0, event.get("after_tokens") or 0
    applied = "" if event.get("applied", True) else " (not applied: too little gained)"
    step: dict[str, Any] = {
        "source": "system", "timestamp": iso_time(event.get("time")),
        "message": (f"Context compaction ({event.get('reason', 'auto')}, stage "
                    f"{event.get('stage', '?')}): {before:,} -> {after:,} tokens{applied}"),
        "extra": {"event": "compaction"} | {
            k: v for k, v in event.items() if k not in ("role", "type", "at", "time", "summary")},
    }
    if event.get("summary"):
        step["observation"] = {"results": [{"content": event["summary"]}]}
    return step


def _image(part: dict[str, Any]) -> dict[str, Any]:
    return {"type": "image", "media_type": part.get("mime_type"), "data": part.get("data")}


def _number(step_id: int, step: dict[str, Any]) -> dict[str, Any]:
    out = {"step_id": step_id}
    out.update((k, v) for k, v in step.items() if v is not None)
    return out


def _version() -> str:
    try:
        return metadata.version("talaria-agent")
    except metadata.PackageNotFoundError:
        return "0+unknown"
