"""Slash commands typed in the editor's agent panel, advertised with `available_commands_update`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from talaria.acp_server.jsonrpc import RpcError
from talaria.acp_server.updates import text_block

if TYPE_CHECKING:
    from talaria.acp_server.server import AcpServer
    from talaria.agent.session import Session

COMMANDS = {
    "compact": ("Summarise the conversation to free context", "optional focus for the summary"),
    "model": ("Show or switch the model", "provider:model"),
    "mode": ("Show or switch the permission mode", "default | accept_edits | plan | auto | dont_ask"),
    "context": ("Show how much of the context window is in use", None),
    "clear": ("Start over with an empty context (history is kept)", None),
}


def available_update() -> dict[str, Any]:
    return {"sessionUpdate": "available_commands_update", "availableCommands": [
        {"name": name, "description": description, **({"input": {"hint": hint}} if hint else {})}
        for name, (description, hint) in COMMANDS.items()
    ]}


def parse(text: str) -> tuple[str, str] | None:
    """("model", "openai:gpt-4.1") for "/model openai:gpt-4.1"; None if not a known command."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    name, _, arg = stripped[1:].partition(" ")
    return (name, arg.strip()) if name in COMMANDS else None


async def run(server: AcpServer, session: Session, name: str, arg: str) -> str:
    reply = await _dispatch(server, session, name, arg)
    await server._notify(session.id, {"sessionUpdate": "agent_message_chunk", "content": text_block(reply)})
    return "end_turn"


async def _dispatch(server: AcpServer, session: Session, name: str, arg: str) -> str:
    from talaria.agent.context import tokens
    if name == "context":
        used = session.last_usage or tokens.count_messages(session.messages, session.tool_definitions())
        share = 100 * used / session.context_window
        return f"Context: {used:,} of {session.context_window:,} tokens ({share:.1f}%), " \
               f"{len(session.messages)} messages."
    if name == "mode":
        if not arg:
            return f"Mode: {session.permissions.mode}"
        await _apply(server, session, "mode", arg)
        return f"Mode set to {session.permissions.mode}."
    if name == "model":
        if not arg:
            return f"Model: {session.provider.name}"
        await _apply(server, session, "model", arg)
        return f"Model set to {session.provider.name}."
    if name == "clear":
        session.messages = [m for m in session.messages[:1] if m.get("role") == "system"]
        session.last_usage = 0
        if session.store is not None:
            session.store.save_context(session.id, session.messages)
        return "Context cleared. Earlier messages stay in the session history."
    if name == "compact":
        from talaria.agent.context.compaction import compact_session, describe

        result = await compact_session(
            session, lambda event: server._emit(session.id, event), focus=arg or None,
            force_summary=True,
        )
        return describe(result)
    raise RpcError.invalid_params(f"unknown command /{name}")


async def _apply(server: AcpServer, session: Session, option: str, value: str) -> None:
    try:
        await server.apply_option(session, option, value)
    except RpcError as exc:
        raise RpcError.invalid_params(f"/{option}: {exc.data or exc.message}") from None
