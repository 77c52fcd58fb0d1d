"""The ACP side of self-improvement: skills in `available_commands_update`, sent again when
they change (a turn or the background review saved a skill).

The review itself is the host's (`Outcome.after`): the prompt's answer is written first, then
`after_prompt` runs the commands update and the review, so the turn never waits for it; the
editor's next prompt runs beside it (the review works on its own snapshot and waits for the
turn to end).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from talaria.acp_server.jsonrpc import Peer

if TYPE_CHECKING:
    from talaria.agent.host import After, SessionHost
    from talaria.agent.session import Session


def available_commands(session: Session) -> dict[str, Any]:
    """The `available_commands_update`: built-in commands, then one per skill."""
    from talaria.agent.commands import COMMANDS
    from talaria.agent.skills.commands import skill_commands

    commands = [{"name": c.name, "description": c.description,
                 **({"input": {"hint": c.hint}} if c.hint else {})} for c in COMMANDS.values()]
    commands += [{"name": c["name"], "description": c["description"], "input": {"hint": c["hint"]}}
                 for c in skill_commands(session, reserved=COMMANDS)]
    return {"sessionUpdate": "available_commands_update", "availableCommands": commands}


class CommandsUpdates:
    """The last `available_commands_update` sent per session, and sending a changed one."""

    def __init__(self, peer: Peer, host: SessionHost) -> None:
        self.peer = peer
        self.host = host
        self.sent: dict[str, dict[str, Any]] = {}

    async def send(self, session: Session, *, force: bool = False) -> None:
        """Send the commands update when it differs from the last one sent (or `force`); a
        closed session gets no more updates."""
        if session.id not in self.host.sessions:
            return
        update = available_commands(session)
        if force or self.sent.get(session.id) != update:
            self.sent[session.id] = update
            await self.peer.notify("session/update", {"sessionId": session.id, "update": update})

    def forget(self, session_id: str) -> None:
        self.sent.pop(session_id, None)

    def after_prompt(self, session: Session, review: After | None) -> Any:
        """What runs once a prompt's answer is on the wire: the commands update (the turn may
        have saved a skill), then the review if one is due, then the update again."""

        async def then() -> None:
            await self.send(session)
            if review is not None:
                await review()
                await self.send(session)

        return then
