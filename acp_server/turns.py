"""ACP's prompts over the session host: `session/prompt`, `session/cancel`, and the keepalive
of running prompts. The host queues, runs and cancels the turn; this module reads the prompt's
content blocks (through the editor), answers with the stop reason, and runs the commands
update and the background review once the answer is out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from talaria.acp_server.jsonrpc import ConnectionClosed, Reply, RpcError
from talaria.agent.host import Content, ModelFailure, SessionHost

if TYPE_CHECKING:
    from talaria.acp_server.learning import CommandsUpdates
    from talaria.acp_server.sessions import AcpSessions
    from talaria.agent.pricing import Spend

TURN_MODULES = ("talaria.acp_server.content", "talaria.acp_server.updates")
"""What a prompt imports of this door that a session's opening does not (see the host's)."""


def turn_usage(spend: Spend | None) -> dict[str, Any] | None:
    """A turn's token counts as the unstable `PromptResponse.usage`: `inputTokens` is every
    call's whole prompt (cached parts included), `outputTokens` its answer (reasoning
    included); `totalTokens` their sum. None when the turn made no model call, or one whose
    provider reported no usage (counts without it would be made up)."""
    if spend is None or not spend.calls or spend.unreported:
        return None
    tokens = spend.tokens
    return {"totalTokens": tokens["input"] + tokens["output"], "inputTokens": tokens["input"],
            "outputTokens": tokens["output"], "thoughtTokens": tokens["reasoning"],
            "cachedReadTokens": tokens["cache_read"], "cachedWriteTokens": tokens["cache_write"]}


class AcpTurns:
    def __init__(self, host: SessionHost, sessions: AcpSessions, commands: CommandsUpdates) -> None:
        self.host = host
        self.sessions = sessions
        self.commands = commands

    async def prompt(self, params: dict[str, Any]) -> Reply:
        """One prompt: queued behind a running turn, or acting on it (`/steer`, `/queue`)."""
        from talaria.acp_server.content import typed_text
        from talaria.agent.commands import CommandError

        session = self.sessions.session(params)
        blocks = params.get("prompt")
        typed = typed_text(blocks) if isinstance(blocks, list) and all(
            isinstance(b, dict) for b in blocks) else ""
        typed = typed if isinstance(typed, str) else ""  # bad blocks: user_content says so

        async def content() -> Content:
            from talaria.acp_server.content import check_size, user_content

            body = await user_content(blocks, session.workspace)
            check_size(body, session.context_window)
            return body

        try:
            outcome = await self.host.prompt(session, typed, content)
        except CommandError as exc:
            raise RpcError.invalid_params(str(exc)) from None
        except ModelFailure as exc:
            raise RpcError.from_model(exc) from None
        answer: dict[str, Any] = {"stopReason": outcome.stop_reason}
        if (usage := turn_usage(outcome.spend)) is not None:
            answer["usage"] = usage
        return Reply(answer, then=self.commands.after_prompt(session, outcome.after))

    async def cancel(self, params: dict[str, Any]) -> None:
        session_id = params.get("sessionId")
        if isinstance(session_id, str):
            self.host.cancel(session_id)

    async def keepalive(self, interval: float) -> None:
        """Editor panels with idle timeouts drop a turn that stays silent too long (VS Code
        ACP clients): a running prompt silent for `interval` s gets an empty text chunk."""
        if not interval:
            return
        while True:
            await anyio.sleep(max(interval / 10, 0.05))
            for session_id in list(self.host.running):
                session = self.host.sessions.get(session_id)
                door: Any = session.door if session is not None else None
                if door is not None and door.silent_for() >= interval:
                    try:
                        await door.notify({"sessionUpdate": "agent_message_chunk",
                                           "content": {"type": "text", "text": ""}})
                    except ConnectionClosed:  # the editor is gone: nobody left to keep alive
                        return
