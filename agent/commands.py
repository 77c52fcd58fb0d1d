"""Slash commands a user types in a session (`/compact`, `/model ...`): the same for every door.

Front doors advertise `COMMANDS` in their own shape (ACP `available_commands_update`), pass a
prompt's text to `parse`, and run what it finds with `run`, whose reply reaches the user as
agent text through the session's door. Option changes go through `talaria.agent.options`.
"""

from __future__ import annotations

from dataclasses import dataclass

from talaria.agent import options
from talaria.agent.config import Config
from talaria.agent.events import TextChunk
from talaria.agent.session import Session


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    description: str
    hint: str | None = None
    """What the argument is, for commands that take one."""


COMMANDS = {c.name: c for c in (
    Command("compact", "Summarise the conversation to free context", "optional focus for the summary"),
    Command("model", "Show or switch the model", "provider:model"),
    Command("mode", "Show or switch the permission mode", " | ".join(options.MODE_NAMES)),
    Command("context", "Show how much of the context window is in use"),
    Command("clear", "Start over with an empty context (history is kept)"),
    Command("mcp", "MCP servers: their state, tools and prompts; with SERVER PROMPT, run a "
                   "server's prompt", "SERVER PROMPT [name=value ...]"),
)}


class CommandError(ValueError):
    """A command given a bad argument; the message says what the user should type."""


def parse(text: str) -> tuple[str, str] | None:
    """("model", "openai:gpt-4.1") for "/model openai:gpt-4.1"; None if not a known command."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    name, _, arg = stripped[1:].partition(" ")
    return (name, arg.strip()) if name in COMMANDS else None


async def run(session: Session, config: Config, name: str, arg: str) -> str:
    """Run a command; its reply goes to the user through the door. Returns the stop reason."""
    if name == "mcp" and arg:  # a server's prompt becomes this turn's prompt
        from talaria.agent.loop import run_turn
        from talaria.agent.mcp_prompts import prompt_text

        try:
            text = await prompt_text(session, arg)
        except ValueError as exc:
            raise CommandError(f"/mcp: {exc}") from None
        return await run_turn(session, text)
    reply = await _dispatch(session, config, name, arg)
    await session.door.emit(TextChunk(reply))
    return "end_turn"


async def _dispatch(session: Session, config: Config, name: str, arg: str) -> str:
    from talaria.agent.context import tokens

    if name == "context":
        used = session.last_usage or tokens.count_messages(session.messages, session.tool_definitions())
        share = 100 * used / session.context_window
        return f"Context: {used:,} of {session.context_window:,} tokens ({share:.1f}%), " \
               f"{len(session.messages)} messages."
    if name == "mode":
        if not arg:
            return f"Mode: {session.permissions.mode}"
        await _set(session, config, "mode", arg)
        return f"Mode set to {session.permissions.mode}."
    if name == "model":
        if not arg:
            return f"Model: {session.provider.name}"
        await _set(session, config, "model", arg)
        return f"Model set to {session.provider.name}."
    if name == "clear":
        session.messages = [m for m in session.messages[:1] if m.get("role") == "system"]
        session.last_usage = 0
        if session.store is not None:
            session.store.save_context(session.id, session.messages)
        return "Context cleared. Earlier messages stay in the session history."
    if name == "mcp":
        from talaria.agent.mcp_prompts import describe_servers

        return describe_servers(session)
    if name == "compact":
        from talaria.agent.context.compaction import compact_session, describe

        result = await compact_session(session, focus=arg or None, force_summary=True)
        return describe(result)
    raise CommandError(f"unknown command /{name}")


async def _set(session: Session, config: Config, option: str, value: str) -> None:
    from talaria.agent.providers.errors import ProviderError

    try:
        await options.set_option(session, config, option, value)
    except options.OptionError as exc:
        raise CommandError(f"/{option}: {exc}") from None
    except ProviderError as exc:  # a model without credentials, or one that does not exist
        raise CommandError(f"/{option}: {exc.user_message()}") from None
