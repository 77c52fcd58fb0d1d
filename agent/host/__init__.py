"""The session host (`host.SessionHost`): what every front door does with sessions, once;
`parts`: what the host and the doors exchange.

May import the rest of the agent's live path (runtime, session, loop, commands, skills' review)
and the tools; never `talaria.agent.trajectories` or a front door (doors import the host)."""

from talaria.agent.host.host import TURN_MODULES, SessionHost
from talaria.agent.host.parts import (
    After,
    Content,
    Doors,
    ModelFailure,
    NoSuchSession,
    Outcome,
    RootsInUse,
)

__all__ = ["TURN_MODULES", "After", "Content", "Doors", "ModelFailure", "NoSuchSession",
           "Outcome", "RootsInUse", "SessionHost"]
