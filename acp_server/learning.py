"""The ACP side of self-improvement: skills in `available_commands_update` (sent again when
they change), `/NAME` prompts, and the background review run after the prompt's answer.

`finish_prompt` answers `session/prompt` with a `Reply` whose `then` runs once the answer is on
the wire: the commands update (scanning the skills costs the answer nothing) and, when one is
due, the review, so the turn never waits for it; the editor's next prompt runs beside it (the
review works on its own snapshot and waits for the turn to end).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from talaria.acp_server.jsonrpc import Peer, Reply

if TYPE_CHECKING:
    from talaria.agent.config import Config
    from talaria.agent.session import Session


class AcpServer(Protocol):
    """What this module uses of `talaria.acp_server.server.AcpServer`."""

    peer: Peer
    config: Config
    sessions: dict[str, Session]
    sent_commands: dict[str, dict[str, Any]]


def available_commands(session: Session) -> dict[str, Any]:
    """The `available_commands_update`: built-in commands, then one per skill."""
    from talaria.agent.commands import COMMANDS
    from talaria.agent.skills.commands import skill_commands

    commands = [{"name": c.name, "description": c.description,
                 **({"input": {"hint": c.hint}} if c.hint else {})} for c in COMMANDS.values()]
    commands += [{"name": c["name"], "description": c["description"], "input": {"hint": c["hint"]}}
                 for c in skill_commands(session, reserved=COMMANDS)]
    return {"sessionUpdate": "available_commands_update", "availableCommands": commands}


async def send_commands(server: AcpServer, session: Session, *, force: bool = False) -> None:
    """Send the commands update when it differs from the last one sent (or `force`)."""
    update = available_commands(session)
    sent = server.sent_commands
    if force or sent.get(session.id) != update:
        sent[session.id] = update
        await server.peer.notify("session/update", {"sessionId": session.id, "update": update})


async def finish_prompt(server: AcpServer, session: Session, reason: str) -> Reply:
    """The answer to `session/prompt`; once it is on the wire, the commands update (when the turn
    changed the skills) and the background review, if one is due."""
    from talaria.agent.skills.review import after_turn

    review = after_turn(session, server.config)

    async def then() -> None:
        # The turn may have saved a skill; a closed session gets no more updates.
        if session.id in server.sessions:
            await send_commands(server, session)
        if review is not None:
            await review()
            if session.id in server.sessions:
                await send_commands(server, session)

    return Reply({"stopReason": reason}, then=then)
