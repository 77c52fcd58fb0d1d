"""Subagents for `delegate_task`: `Delegator` runs them, `ChildDoor` shows them as cards."""

from __future__ import annotations

from talaria.agent.subagents.delegator import EXCLUDED_TOOLS, MAX_DEPTH, Delegator
from talaria.agent.subagents.door import ChildDoor

__all__ = ["EXCLUDED_TOOLS", "MAX_DEPTH", "ChildDoor", "Delegator"]
