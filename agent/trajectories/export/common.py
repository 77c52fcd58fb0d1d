"""What the exporters share: the tool catalog a dataset is described with, content helpers,
and each record's outcome (reward, resolved, cost)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from talaria.agent.trajectories.model import Trajectory, TurnUsage
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


OUTCOME_KEYS = ("reward", "resolved", "cost_usd")
"""What every exported record carries about its outcome (None when not known)."""


def outcome(traj: Trajectory, prices: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """{"reward", "resolved", "cost_usd"} of a trajectory: the verdict a batch line recorded
    (None for a session: nothing checked it), and its cost: the one a batch line recorded, else
    each model call at its model's price (`talaria.agent.pricing`; None when one has no price)."""
    extra = traj.extra
    recorded = extra.get("cost_usd") if "cost_usd" in extra else _cost(traj, prices)
    return {"reward": extra.get("reward"), "resolved": extra.get("resolved"),
            "cost_usd": recorded}


def call_cost(usage: TurnUsage, model: str | None, prices: Mapping[str, Any] | None) -> float | None:
    """Dollars of one model call, or None without a price for its model."""
    from talaria.agent.pricing import cost_usd, price_for

    return cost_usd({"input": usage.input_tokens, "output": usage.output_tokens,
                     "cache_read": usage.cache_read_tokens, "cache_write": usage.cache_write_tokens},
                    price_for(usage.model or model, prices))


def _cost(traj: Trajectory, prices: Mapping[str, Any] | None) -> float | None:
    if not traj.turns:
        return 0.0
    if not any(t.input_tokens or t.output_tokens for t in traj.turns):
        # A ShareGPT line keeps totals, not calls: one price for the line's model.
        totals = traj.totals()
        if not any(totals.values()):
            return None  # nothing says what was spent
        usage = TurnUsage(0, traj.model, totals["input_tokens"], totals["output_tokens"],
                          totals["cache_read_tokens"], totals["cache_write_tokens"])
        return _round(call_cost(usage, traj.model, prices))
    total: float | None = 0.0
    for turn in traj.turns:
        call = call_cost(turn, traj.model, prices)
        total = None if total is None or call is None else total + call
    return _round(total)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
