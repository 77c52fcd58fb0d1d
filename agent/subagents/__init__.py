"""Subagents for `delegate_task`: `Delegator` runs them, `ChildDoor` shows them as cards.

May import the agent's core (session, loop, events, permissions) and `talaria.tools`; the
runtime wires it in and passes `new_session` in, so it never imports the runtime.
"""

from __future__ import annotations

from talaria.agent.subagents.delegator import EXCLUDED_TOOLS, MAX_DEPTH, Delegator
from talaria.agent.subagents.door import ChildDoor

__all__ = ["EXCLUDED_TOOLS", "MAX_DEPTH", "ChildDoor", "Delegator"]
