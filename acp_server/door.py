"""`AcpDoor`: one ACP session's front door (see `talaria.agent.door.FrontDoor`).

Events become `session/update` notifications, permission questions become
`session/request_permission` requests, and tools act through the editor (`EditorWorkspace`,
which falls back to the local disk per capability the client does not advertise). The
`clarify` tool's questions become an `elicitation/create` form when the client advertises
`elicitation.form`, else a permission-style question whose options are the choices
(`talaria.acp_server.questions`). Subagents are tool cards everywhere; a client that
advertises the unstable `subagents` capability also gets `subagent_update`s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from talaria.acp_server.jsonrpc import Peer, PeerError, RpcError
from talaria.agent.permissions import UNASKED, PermissionAsk
from talaria.tools.handoffs import Answer, Clarifier, Question
from talaria.tools.workspace import Workspace

if TYPE_CHECKING:
    from talaria.agent.events import Event

log = logging.getLogger(__name__)

PERMISSION_OPTIONS = [
    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject_always", "name": "Always reject", "kind": "reject_always"},
]


class AcpDoor:
    def __init__(
        self, peer: Peer, session_id: str, workspace: Workspace, *,
        compaction_updates: bool, config_options: Callable[[], list[dict[str, Any]]],
        on_editor_gone: Callable[[], object], elicitation: bool = False,
        subagents: bool = False, notices: bool = False,
    ) -> None:
        self.peer = peer
        self.session_id = session_id
        self.workspace = workspace
        self.compaction_updates = compaction_updates
        """The client advertised `session.compaction`: compactions are `compaction_update`s,
        their summaries streamed as `compaction_summary_chunk`s (else compactions are notices)."""
        self._summaries: dict[str, list[str]] = {}
        """Compaction id -> the summary streamed so far."""
        self._config_options = config_options
        self._on_editor_gone = on_editor_gone
        self.elicitation = elicitation
        """The client advertised `elicitation.form`: questions are forms."""
        self.subagents = subagents
        """The client advertised the unstable `subagents`: `subagent_update`s are sent."""
        self.notices = notices
        """The client advertised the unstable `session.notices`: notices are `notice` updates."""
        self.last_sent = time.monotonic()

    def silent_for(self) -> float:
        """Seconds since the last `session/update` of this session (see the keepalive)."""
        return time.monotonic() - self.last_sent

    async def emit(self, event: Event) -> None:
        # The events and their rendering are imported here, not with the module: a session's
        # opening emits none, and `session/new` answered ~5 ms later with them (they load
        # with the turn's modules once its answer is out: `turns.TURN_MODULES`).
        from talaria.acp_server.updates import (
            compaction,
            notice,
            subagent_update,
            summary_chunk,
            to_update,
        )
        from talaria.agent import events as ev

        if isinstance(event, ev.Compacted):
            streamed = "".join(self._summaries.pop(event.id, ()))
            for part in compaction(event, client_supports=self.compaction_updates,
                                     streamed=streamed):
                await self.notify(part)
        elif isinstance(event, ev.CompactionText):
            if self.compaction_updates:
                self._summaries.setdefault(event.id, []).append(event.text)
                await self.notify(summary_chunk(event.id, event.text))
        elif isinstance(event, ev.OptionChanged):
            if event.option == "mode":
                await self.notify({"sessionUpdate": "current_mode_update", "currentModeId": event.value})
            await self.notify({"sessionUpdate": "config_option_update",
                               "configOptions": self._config_options()})
        elif isinstance(event, ev.Notice):
            if self.notices:
                await self.notify(notice(event))
            elif event.quiet:  # not part of the answer: a recorder would take it for the model's
                log.info("notice: %s", event.text)
            else:
                await self.notify(to_update(event) or {})
        elif isinstance(event, ev.SubagentChanged):
            if self.subagents:
                await self.notify(subagent_update(event))
        elif (update := to_update(event)) is not None:
            await self.notify(update)

    async def notify(self, update: dict[str, Any]) -> None:
        self.last_sent = time.monotonic()
        await self.peer.notify("session/update", {"sessionId": self.session_id, "update": update})

    @property
    def clarifier(self) -> Clarifier:
        return self.question

    @property
    def root(self) -> AcpDoor:
        return self

    async def question(self, question: Question) -> Answer:
        """Ask the user (the `clarify` tool); a cancelled question cancels the turn."""
        from talaria.acp_server.questions import ask

        answer = await ask(self.peer, self.session_id, question, form=self.elicitation)
        if answer.cancelled:
            self._on_editor_gone()  # cancels the session's turn, whoever cancelled
        return answer

    async def ask(self, ask: PermissionAsk) -> str:
        from talaria.acp_server.updates import permission_tool_call

        try:
            result = await self.peer.request(
                "session/request_permission",
                {"sessionId": self.session_id, "toolCall": permission_tool_call(ask),
                 "options": PERMISSION_OPTIONS},
                timeout=None,
            )
        except RpcError as exc:  # a client that cannot ask: nobody allowed it, nobody refused
            log.warning("session/request_permission failed: %s", exc)
            return UNASKED
        except PeerError:  # the editor is gone: nobody can answer, stop the turn
            self._on_editor_gone()
            return "cancelled"
        outcome = result.get("outcome") if isinstance(result, dict) else None
        if not isinstance(outcome, dict) or outcome.get("outcome") != "selected":
            return "cancelled"
        chosen = outcome.get("optionId")
        return chosen if chosen in {o["optionId"] for o in PERMISSION_OPTIONS} else "reject_once"
