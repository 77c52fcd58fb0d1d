"""What the exporters share: the tool catalog a dataset is described with, content helpers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from talaria.agent.transcript import is_tool_result


@dataclass(frozen=True, slots=True)
class ToolCatalog:
    """The tools a dataset is described with: definitions for system prompts and schemas,
    toolsets for `toolsets_used`, and every name for stable `tool_stats` keys."""

    definitions: tuple[dict[str, Any], ...] = ()
    toolsets: dict[str, str] = field(default_factory=dict)

    @classmethod
    def builtin(cls) -> ToolCatalog:
        """Every registered built-in tool."""
        from talaria.tools.builtin import load_builtin_tools

        specs = load_builtin_tools().select()
        return cls(tuple(s.definition() for s in specs), {s.name: s.toolset for s in specs})

    @property
    def names(self) -> list[str]:
        return [d["name"] for d in self.definitions]



def images(content: Any) -> list[dict[str, Any]]:
    """The image parts of a message's content."""
    if not isinstance(content, list):
        return []
    return [part for part in content if part.get("type") == "image"]


def subagent_runs(messages: Any) -> list[tuple[str, dict[str, Any]]]:
    """(tool call id, run) for each subagent a `delegate_task` call started: the run is
    {task, goal, status, session_id, messages} as the tool runner filed it under the result."""
    return [(str(m.get("tool_call_id", "")), run) for m in messages if is_tool_result(m)
            for run in m.get("subagents") or () if isinstance(run, dict)]


def run_header(call_id: str, run: dict[str, Any]) -> dict[str, Any]:
    """The fields every export gives a subagent before its own transcript."""
    return {"tool_call_id": call_id, "task": run.get("task"), "goal": run.get("goal") or "",
            "status": run.get("status") or "", "session_id": run.get("session_id")}
