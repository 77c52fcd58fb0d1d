"""`talaria run`: one task in the terminal on the local workspace.

Text streams to stdout, a line per tool call shows its status, and a summary ends the run.
`--json` prints every event as a JSON line instead. Without `--yes`, an edit or a command asks
on the controlling terminal, showing an edit's diff first; with no terminal it is refused, the
run says so and how to allow it, and exits 4. Exit statuses: `talaria.acp_server.cli.exits`.

With `--acp` the same task runs through the protocol: `talaria acp` as a child process driven by
`AcpClient` (this process is its editor), and `--json` prints the `session/update` payloads.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import anyio

from talaria.acp_server.cli import exits
from talaria.acp_server.cli.unasked import unasked_message
from talaria.acp_server.client.policies import TerminalAsker
from talaria.agent import events as ev
from talaria.agent.permissions import Asker, PermissionAsk

STATUS_MARK = {"completed": "✓", "failed": "✗"}
UNASKED = "not allowed: there was no terminal to ask on"


class TerminalView:
    """Renders events for a person (or as JSON lines), counting tool calls for the summary."""

    def __init__(self, out: TextIO, *, as_json: bool, unasked: Mapping[str, str] | None = None) -> None:
        self.out = out
        self.as_json = as_json
        self.unasked: Mapping[str, str] = {} if unasked is None else unasked
        """Tool calls refused because nobody could be asked (`TerminalAsker.unasked`)."""
        self.titles: dict[str, str] = {}
        self.tool_calls = 0
        self.failed = 0
        self.at_line_start = True

    async def __call__(self, event: ev.Event) -> None:
        if self.as_json:  # then only counted: the text methods below print nothing
            self._json(ev.event_to_dict(event))
        match event:
            case ev.TextChunk(text=text):
                self._write(text)
            case ev.ToolCallStarted(id=call_id, title=title):
                self.titles[call_id] = title
            case ev.ToolCallFinished(id=call_id, status=status, result=result):
                self._finished(call_id, status, result.get("error"))
            case ev.PlanUpdated(entries=entries):
                self._plan(entries)
            case ev.Notice(text=text):
                self._line(f"! {text}")

    async def update(self, session_id: str, update: dict[str, Any]) -> None:
        """The same rendering for an ACP `session/update` (`AcpClient`'s `on_update`)."""
        if self.as_json:
            self._json({"sessionId": session_id, "update": update})
        kind, call_id = update.get("sessionUpdate"), str(update.get("toolCallId", ""))
        if kind == "agent_message_chunk":
            content = update.get("content") or {}
            if content.get("type") == "text":
                self._write(str(content.get("text", "")))
        elif kind in ("tool_call", "tool_call_update"):
            if update.get("title"):
                self.titles[call_id] = str(update["title"])
            if update.get("status") in ("completed", "failed"):
                texts = [c["content"].get("text", "") for c in update.get("content") or ()
                         if isinstance(c, dict) and c.get("type") == "content"
                         and isinstance(c.get("content"), dict)]
                failed = update["status"] == "failed"
                self._finished(call_id, update["status"], texts[0] if failed and texts else None)
        elif kind == "plan":
            self._plan(update.get("entries") or ())

    def _finished(self, call_id: str, status: str, error: Any) -> None:
        self.tool_calls += 1
        self.failed += status == "failed"
        if call_id in self.unasked:  # not "The user rejected": nobody was there to ask
            error = UNASKED
        detail = f" — {error}" if error else ""
        self._line(f"{STATUS_MARK.get(status, '?')} {self.titles.get(call_id, call_id)}{detail}")

    def _plan(self, entries: Any) -> None:
        self._line("plan: " + "; ".join(f"[{e['status']}] {e['content']}" for e in entries))

    def _json(self, line: dict[str, Any]) -> None:
        print(json.dumps(line, ensure_ascii=False, default=str), file=self.out)
        self.out.flush()

    def _write(self, text: str) -> None:
        if self.as_json:
            return
        self.out.write(text)
        self.out.flush()
        self.at_line_start = text.endswith("\n")

    def _line(self, text: str) -> None:
        if not self.at_line_start:
            self.out.write("\n")
        self._write(text[:300] + "\n")


def local_asker(policy: TerminalAsker) -> Asker:
    """An ACP permission policy as the agent's Asker: the in-process run asks the same question,
    diff included, that `talaria run --acp` and editors are asked."""
    from talaria.acp_server.door import PERMISSION_OPTIONS
    from talaria.acp_server.updates import permission_tool_call

    async def ask(question: PermissionAsk) -> str:
        params = {"sessionId": "", "toolCall": permission_tool_call(question),
                  "options": PERMISSION_OPTIONS}
        return await policy(params) or "cancelled"

    return ask


class LocalDoors:
    """The host's `Doors` for a run in this process: the disk, events to `on_event`,
    questions to `asker`."""

    def __init__(self, on_event: Any, asker: Asker) -> None:
        self.on_event = on_event
        self.asker = asker

    def workspace(self, session_id: str, cwd: Path, roots: tuple[Path, ...]) -> Any:
        from talaria.tools.local.workspace import LocalWorkspace

        return LocalWorkspace(cwd, roots)

    def door(self, session_id: str, workspace: Any) -> Any:
        from talaria.agent.door import LocalDoor

        return LocalDoor(workspace, on_event=self.on_event, asker=self.asker)


async def run_task(
    prompt: str, *, cwd: Path, flags: dict[str, Any], yes: bool, view: TerminalView,
    policy: TerminalAsker | None = None, additional_dirs: tuple[Path, ...] = (),
) -> tuple[str, str, Path]:
    """Run one prompt; returns (stop reason, session id, sessions.db path). Without `yes`,
    permission questions go to `policy` (default: a new TerminalAsker). Raises the host's
    ModelFailure, EnvError (the environment cannot start), CommandError."""
    from talaria.agent.config import load_config
    from talaria.agent.host import SessionHost

    config = load_config(flags)
    host = SessionHost(config, LocalDoors(view, local_asker(policy or TerminalAsker())),
                       editor=False)
    try:
        session = await host.open(cwd, mode="bypass" if yes else None,
                                  additional_dirs=additional_dirs)
        outcome = await host.prompt(session, prompt)
        # The answer is printed; a due background review runs now, its notices after it.
        if outcome.after is not None:
            await outcome.after()
        return outcome.stop_reason, session.id, host.store.path
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(host.close_all)


def child_env(**overrides: str) -> dict[str, str]:
    """Our environment for a `talaria acp` child whose stderr is the user's terminal."""
    from talaria.agent.config import load_config

    env = dict(os.environ, **overrides)
    # The agent logs INFO to stderr (editors keep it in a log panel); here those lines would
    # interleave with the answer. Warnings still show; an explicit log level still wins.
    if load_config(env=env).sources.get("log_level") == "default":
        env["TALARIA_LOG_LEVEL"] = "WARNING"
    return env


async def run_over_acp(
    prompt: str, *, cwd: Path, flags: dict[str, Any], yes: bool, view: TerminalView,
    policy: TerminalAsker | None = None, additional_dirs: tuple[Path, ...] = (),
) -> tuple[str, str]:
    """Run one prompt through a `talaria acp` child; returns (stop reason, session id)."""
    from talaria.acp_server.client.core import AcpClient, allow_all

    env = child_env()
    for name, var in (("model", "TALARIA_MODEL"), ("max_turns", "TALARIA_MAX_TURNS"),
                      ("environment", "TALARIA_ENVIRONMENT"), ("checkpoints", "TALARIA_CHECKPOINTS")):
        if flags.get(name) is not None:
            value = flags[name]
            env[var] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    permission = allow_all if yes else policy or TerminalAsker()
    async with AcpClient(env=env, cwd=cwd, permission=permission, on_update=view.update) as client:
        await client.initialize()
        session_id = await client.open_session(cwd, additional_dirs=additional_dirs)
        if flags.get("mode"):
            await client.set_mode(session_id, flags["mode"])
        return await client.prompt(session_id, prompt), session_id


def _error_line(view: TerminalView, text: str) -> None:
    """`talaria: <text>` on stderr, after ending a partial line of the answer (not a blank line)."""
    if not view.at_line_start:
        view.out.write("\n")
        view.out.flush()
    print(f"talaria: {text}", file=sys.stderr)


def run_cli(args: argparse.Namespace) -> int:
    """Exit status: see `talaria.acp_server.cli.exits` (Ctrl-C is handled by `main`)."""
    from talaria.acp_server.jsonrpc import PeerError, RpcError
    from talaria.agent.commands import CommandError
    from talaria.agent.host import ModelFailure
    from talaria.tools.errors import EnvError
    from talaria.tools.procs import reap_orphans

    reap_orphans()  # what a crashed agent left running
    if not args.prompt.strip():
        print('talaria: the prompt is empty: say what to do, e.g. talaria run "fix the failing '
              'test"', file=sys.stderr)
        return exits.USAGE
    cwd = Path(args.cwd).resolve()
    if not cwd.is_dir():
        print(f"talaria: --cwd {cwd} is not a directory", file=sys.stderr)
        return exits.USAGE
    try:
        from talaria.tools.paths import additional_dirs

        dirs = additional_dirs(cwd, [str(Path(d).resolve()) for d in args.add_dir])
    except ValueError as exc:
        print(f"talaria: --add-dir: {exc}", file=sys.stderr)
        return exits.USAGE
    if args.mode is not None:
        from talaria.agent.permissions import normalize_mode

        try:
            args.mode = normalize_mode(args.mode)
        except ValueError as exc:
            print(f"talaria: --mode: {exc}", file=sys.stderr)
            return exits.USAGE
    flags = {"model": args.model, "mode": args.mode, "max_turns": args.max_turns,
             "environment": getattr(args, "env", None),
             "checkpoints": False if getattr(args, "no_checkpoints", False) else None}
    policy = TerminalAsker()
    view = TerminalView(sys.stdout, as_json=args.json, unasked=policy.unasked)
    task = run_over_acp if getattr(args, "acp", False) else run_task
    try:
        reason, session_id, *_ = anyio.run(lambda: task(
            args.prompt, cwd=cwd, flags=flags, yes=args.yes, view=view, policy=policy,
            additional_dirs=dirs))
    except ModelFailure as exc:
        _error_line(view, exc.message)
        return exits.MODEL
    except RpcError as exc:  # the agent's answer: -32000 no credentials, -32602 a bad flag
        # A model error's message is the whole story (its data is for programs); a bare
        # "Invalid params" needs its data.
        _error_line(view, exc.data if isinstance(exc.data, str) else exc.message)
        return exits.USAGE if exc.code == -32602 else exits.MODEL
    except PeerError as exc:
        _error_line(view, f"the agent stopped answering ({exc})")
        return exits.NOT_DONE
    except (ValueError, EnvError, CommandError) as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return exits.USAGE
    summary = {"stop_reason": reason, "session": session_id, "tool_calls": view.tool_calls,
               "failed_tool_calls": view.failed, "unasked_tool_calls": len(policy.unasked)}
    if args.json:
        print(json.dumps({"type": "summary", **summary}))
    else:
        print(f"\n— {reason}: {view.tool_calls} tool calls ({view.failed} failed), session {session_id}")
    if policy.unasked:
        print(unasked_message(policy.unasked, policy.kinds, args.mode), file=sys.stderr)
        return exits.NO_TERMINAL
    return exits.DONE if reason == "end_turn" else exits.NOT_DONE
