"""A trajectory as an ATIF document: the Agent Trajectory Interchange Format, ATIF-v1.8.

Spec: Harbor RFC 0001 "Agent Trajectory Interchange Format (ATIF) Specification"
(https://github.com/harbor-framework/harbor/blob/main/rfcs/0001-trajectory-format.md). Every
document is checked against the pydantic models of the `atif` package (PyPI; its MAJOR.MINOR
is the ATIF version it implements) before it is written: `validate` below.

    {schema_version: "ATIF-v1.8", session_id, agent: {name, version, model_name,
     tool_definitions}, notes, steps: [...],
     final_metrics: {total_prompt_tokens, total_completion_tokens, total_cached_tokens,
                     total_cost_usd, total_steps, extra},
     subagent_trajectories: [embedded documents, each with its trajectory_id],
     extra: {completion_status, partial, reward, resolved, ...}}

    step: {step_id (1, 2, ...), timestamp (ISO 8601), source: system | user | agent,
           message, and for agent steps only: model_name, reasoning_content,
           tool_calls: [{tool_call_id, function_name, arguments (an object)}],
           observation: {results: [{source_call_id, content, subagent_trajectory_ref}]},
           metrics: {prompt_tokens (cached included), completion_tokens, cached_tokens,
                     cost_usd, extra: {reasoning_tokens, cache_creation_input_tokens}}; extra}

Mapping: each model call is one agent step, its tool results that step's observation.
Compaction events are system steps whose observation holds the summary (observations on
system steps are for context management). Images are `[image]` in the text and their data sits
in the step's `extra.images` (ATIF's image parts point at files; an export is one file).
Arguments that are not a JSON object become `{}` with the raw text in
`extra.invalid_arguments`. A `delegate_task` result refers to its subagents
(`subagent_trajectory_ref`: trajectory_id, session_id, extra {task, goal, status}); they are
embedded whole in the root's `subagent_trajectories` (v1.7), nested the same way.

Partial trajectories are marked in the root's `extra`: `partial` true and `completion_status`
`partial` when the last model call did not end the turn (cancelled, out of turns, crashed),
with the batch's `status` and `reason` (`timeout`, `cost_limit`, ...) when a batch line says
why; a subagent's own `status` (`cancelled`, `budget_exceeded`, `failed`) likewise. `reward`
and `resolved` are the verifier's (None for a session nothing checked); the cost of each call
and of the whole (`agent.pricing`) is ATIF's `cost_usd` / `total_cost_usd`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from talaria.agent.events import figures
from talaria.agent.trajectories.export.common import (
    ToolCatalog,
    call_cost,
    images,
    outcome,
    subagent_runs,
)
from talaria.agent.trajectories.model import Trajectory, TurnUsage, build, iso_time
from talaria.agent.transcript import Message, content_text, is_tool_result

SCHEMA_VERSION = "ATIF-v1.8"
SOURCE_KEYS = ("prompt_index", "task_id", "attempt", "status", "reason", "error", "skills")
"""Fields of a source line (a batch's trajectories.jsonl) kept in the document's `extra`."""
AGENT_NAME = "talaria"
NOTES = ("Exported by Talaria. Each agent step is one model call; its observation holds that "
         "call's tool results. Compaction events are system steps. Images are [image] in "
         "message text, with their data in the step's extra.images. extra.partial marks a "
         "trajectory whose turn did not end (cancelled, timed out, failed).")


def to_atif(traj: Trajectory, *, agent_version: str | None = None,
            catalog: ToolCatalog | None = None,
            prices: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One ATIF document (not yet redacted: `talaria.agent.trajectories.export.export` does
    that, then `validate`). `catalog`: the tools it had, as the agent's `tool_definitions`."""
    parts = _Parts(prices)
    steps = _steps(traj, parts)
    totals = traj.totals()
    result = outcome(traj, prices)
    agent: dict[str, Any] = {"name": AGENT_NAME, "version": agent_version or _version(),
                             "model_name": traj.model}
    if catalog is not None and catalog.definitions:
        from talaria.agent.trajectories.export.openai import wire_tools

        agent["tool_definitions"] = wire_tools(catalog)
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "session_id": traj.session_id,
        "agent": agent,
        "notes": NOTES,
        "steps": steps,
        "final_metrics": {
            "total_prompt_tokens": totals["input_tokens"],
            "total_completion_tokens": totals["output_tokens"],
            "total_cached_tokens": totals["cache_read_tokens"],
            **({"total_cost_usd": result["cost_usd"]} if result["cost_usd"] is not None else {}),
            "total_steps": len(steps),
            "extra": {"total_reasoning_tokens": totals["reasoning_tokens"],
                      "total_cache_creation_input_tokens": totals["cache_write_tokens"],
                      "api_calls": traj.api_calls, "duration_ms": traj.duration_ms(),
                      "tool_stats": traj.tool_stats},
        },
        "extra": {"completion_status": traj.status,
                  "partial": not traj.completed or traj.extra.get("status") == "failed",
                  "reward": result["reward"], "resolved": result["resolved"],
                  "title": traj.title, "cwd": traj.cwd, "mode": traj.mode,
                  **{key: traj.extra[key] for key in SOURCE_KEYS if traj.extra.get(key) is not None}},
    }
    if parts.subagents:
        doc["subagent_trajectories"] = parts.subagents
    return doc


def validate(doc: dict[str, Any]) -> None:
    """Raise ValueError (one line: where and what) unless `doc` is a valid ATIF document by
    the `atif` package's models: types, agent-only fields, step ids, call ids, subagent ids."""
    from atif import Trajectory as Atif
    from pydantic import ValidationError

    try:
        Atif.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "document"
        raise ValueError(f"not valid {SCHEMA_VERSION} ({exc.error_count()} error(s); "
                         f"{where}: {first['msg']})") from None


@dataclass(slots=True)
class _Parts:
    """What a document's steps need beyond the trajectory, and what they collect."""

    prices: Mapping[str, Any] | None
    subagents: list[dict[str, Any]] = field(default_factory=list)
    """The subagents' documents, embedded in the root (`subagent_trajectories`)."""


def _steps(traj: Trajectory, parts: _Parts) -> list[dict[str, Any]]:
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
            step = _agent(message, messages[i + 1:j], usage.get(i), when, parts)
            if (metrics := step.get("metrics")) is not None and usage.get(i) is not None:
                cost = call_cost(usage[i], traj.model, parts.prices)
                if cost is not None:  # before `extra`, as the spec lists the fields
                    extra = metrics.pop("extra", None)
                    metrics["cost_usd"] = round(cost, 6)
                    if extra is not None:
                        metrics["extra"] = extra
            steps.append(step)
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
           when: float | None, parts: _Parts) -> dict[str, Any]:
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
        step["observation"] = {"results": [_result(r, ids, parts) for r in results]}
        extra["tool_status"] = {r.get("tool_call_id"): r.get("status") for r in results
                                if r.get("status")}
        found = [_image(p) | {"source_call_id": r.get("tool_call_id")}
                 for r in results for p in images(r.get("content"))]
        if found:
            extra["images"] = found
    if "usage" in message and usage is not None:
        step["metrics"] = _metrics(usage)
    if usage is not None and usage.duration_ms is not None:
        extra["duration_ms"] = usage.duration_ms
    if message.get("interrupted"):
        extra["interrupted"] = True
    if extra:
        step["extra"] = extra
    return step


def _result(result: Message, ids: set[str], parts: _Parts) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if result.get("tool_call_id") in ids:  # the validator checks every id against the step's calls
        out["source_call_id"] = result["tool_call_id"]
    out["content"] = content_text(result.get("content"), "[image]")
    refs = [_subagent(call_id, run, parts) for call_id, run in subagent_runs([result])]
    if refs:  # delegate_task: each subagent embedded in the root, referred to here
        out["subagent_trajectory_ref"] = refs
    return out


def _subagent(call_id: str, run: dict[str, Any], parts: _Parts) -> dict[str, Any]:
    """Embed one subagent's run (its own subagents nested in it) and return the reference."""
    session_id = str(run.get("session_id") or f"{call_id}-{run.get('task')}")
    trajectory_id = f"{call_id}:{run.get('task')}"
    status = str(run.get("status") or "")
    child = to_atif(build(run.get("messages") or [], None, session_id=session_id),
                    prices=parts.prices)
    child["trajectory_id"] = trajectory_id
    child["extra"] |= {"status": status, "partial": status != "completed",
                       "parent_tool_call_id": call_id}
    parts.subagents.append(child)
    return {"trajectory_id": trajectory_id, "session_id": session_id,
            "extra": {"task": run.get("task"), "goal": run.get("goal") or "", "status": status}}


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
    before, after = figures(event)
    applied = "" if event.get("applied", True) else " (not applied: too little gained)"
    step: dict[str, Any] = {
        "source": "system", "timestamp": iso_time(event.get("time")),
        "message": (f"Context compaction ({event.get('reason', 'auto')}, stage "
                    f"{event.get('stage', '?')}): {before} -> {after} tokens{applied}"),
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


@functools.cache
def _version() -> str:
    """Talaria's version (read once: the package metadata is parsed on each lookup)."""
    try:
        return metadata.version("talaria-agent")
    except metadata.PackageNotFoundError:
        return "0+unknown"
