"""Slash commands a user types in a session (`/compact`, `/model ...`): the same for every door.

Front doors advertise `COMMANDS` in their own shape (ACP `available_commands_update`), pass a
prompt's text to `parse`, and run what it finds with `run`, whose reply reaches the user as
agent text through the session's door. Option changes go through `talaria.agent.options`.
`LIVE` commands (`/steer`, `/queue`) act on the running turn, so a door runs them at once
instead of queueing them behind it; their reply is a notice.
"""

from __future__ import annotations

from dataclasses import dataclass

from talaria.agent import options
from talaria.agent.config import Config
from talaria.agent.events import Notice, PlanUpdated, TextChunk
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
    Command("skills", "List the skills (each is also a /command)"),
    Command("steer", "Tell the running turn something; it reads it before its next step",
            "what the agent should know or do differently"),
    Command("queue", "List the prompts waiting for the running turn; /queue clear drops them",
            "clear"),
    Command("undo", "Put back the files the last turn changed"),
    Command("checkpoints", "List the checkpoints taken before turns changed files"),
    Command("restore", "Put the project's files back as they were at checkpoint N", "N"),
    Command("mcp", "MCP servers: their state, tools and prompts; with SERVER PROMPT, run a "
                   "server's prompt", "SERVER PROMPT [name=value ...]"),
)}
LIVE = frozenset({"steer", "queue"})
"""Commands that act on the running turn: run at once, never queued behind it."""


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
    await session.door.emit(Notice(reply) if name in LIVE else TextChunk(reply))
    return "end_turn"


async def _dispatch(session: Session, config: Config, name: str, arg: str) -> str:
    if name == "context":
        used = session.context.last_usage or await session.context.exact(session.tool_definitions())
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
    if name == "skills":
        from talaria.agent.skills.commands import listing

        return listing(session)
    if name == "clear":
        session.context.clear()
        if session.store is not None:
            session.store.save_context(session.id, session.messages)
        if session.tool_state.todos:  # the plan belonged to the context just dropped
            session.tool_state.todos = []
            await session.door.emit(PlanUpdated(()))
        return "Context cleared. Earlier messages stay in the session history."
    if name == "steer":
        return _steer(session, arg)
    if name == "queue":
        return _queue(session, arg)
    if name in ("undo", "checkpoints", "restore"):
        from talaria.agent.checkpoints import CheckpointError
        from talaria.agent.checkpoints.commands import checkpoint_command

        try:
            return await checkpoint_command(session, name, arg)
        except CheckpointError as exc:
            raise CommandError(str(exc)) from None
    if name == "mcp":
        from talaria.agent.mcp_prompts import describe_servers

        return describe_servers(session)
    if name == "compact":
        from talaria.agent.context.compaction import compact_session, describe

        result = await compact_session(session, focus=arg or None, force_summary=True)
        return describe(result)
    raise CommandError(f"unknown command /{name}")


def _steer(session: Session, text: str) -> str:
    if not text:
        raise CommandError("/steer needs a note, e.g. /steer use the existing helper in utils.py")
    if not session.turn_running:
        raise CommandError("/steer: no turn is running, so there is nothing to steer; "
                           "send the note as a prompt instead")
    session.steer_notes.append(text)
    return "Steering note noted: the agent reads it before its next step."


def _queue(session: Session, arg: str) -> str:
    waiting = session.prompts.waiting
    if arg == "clear":
        dropped = session.prompts.clear()
        return f"Dropped {dropped} waiting prompt(s)." if dropped else "No prompts were waiting."
    if arg:
        raise CommandError(f"/queue takes no argument but `clear`, not {arg!r}")
    if not waiting:
        return "No prompts are waiting."
    lines = [f"{i}. {w.preview}" for i, w in enumerate(waiting, 1)]
    return f"{len(waiting)} prompt(s) waiting for the running turn:\n" + "\n".join(lines)


async def _set(session: Session, config: Config, option: str, value: str) -> None:
    from talaria.agent.providers.errors import ProviderError

    try:
        await options.set_option(session, config, option, value)
    except options.OptionError as exc:
        raise CommandError(f"/{option}: {exc}") from None
    except ProviderError as exc:  # a model without credentials, or one that does not exist
        raise CommandError(f"/{option}: {exc.user_message()}") from None
