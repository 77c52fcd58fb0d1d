"""`talaria run`: one task in the terminal on the local workspace.

Text streams to stdout, a line per tool call shows its status, and a summary ends the run.
`--json` prints every event as a JSON line instead. Exit status 0 on `end_turn`.

With `--acp` the same task runs through the protocol: `talaria acp` as a child process driven by
`AcpClient` (this process is its editor), and `--json` prints the `session/update` payloads.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

import anyio

from talaria.agent import events as ev
from talaria.agent.permissions import PermissionAsk

STATUS_MARK = {"completed": "✓", "failed": "✗"}


class TerminalView:
    """Renders events for a person (or as JSON lines), counting tool calls for the summary."""

    def __init__(self, out: TextIO, *, as_json: bool) -> None:
        self.out = out
        self.as_json = as_json
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


async def ask_on_terminal(ask: PermissionAsk) -> str:
    """Ask the person at the terminal; without one, refuse (use --yes to allow)."""
    if not sys.stdin.isatty():
        return "reject_once"
    prompt = f"\nAllow {ask.title} ({ask.reason})? [y]es / [a]lways / [n]o / [N]ever: "
    answer = (await anyio.to_thread.run_sync(input, prompt)).strip()
    return {"y": "allow_once", "a": "allow_always", "N": "reject_always"}.get(answer, "reject_once")


async def run_task(
    prompt: str, *, cwd: Path, flags: dict[str, Any], yes: bool, view: TerminalView
) -> tuple[str, str, Path]:
    """Run one prompt; returns (stop reason, session id, sessions.db path)."""
    from talaria.agent.config import load_config
    from talaria.agent.runtime import make_provider, new_session, open_store
    from talaria.tools.local.workspace import LocalWorkspace

    config = load_config(flags)
    store = open_store(config)
    try:
        session = new_session(
            config, cwd=cwd, workspace=LocalWorkspace(cwd), provider=make_provider(config),
            store=store, asker=ask_on_terminal, mode="bypass" if yes else None,
        )
        reason = await _turn(session, prompt, view)
        return reason, session.id, store.path
    finally:
        store.close()


async def _turn(session: Any, prompt: str, view: TerminalView) -> str:
    from talaria.agent.loop import run_turn

    return await run_turn(session, prompt, view)


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
    prompt: str, *, cwd: Path, flags: dict[str, Any], yes: bool, view: TerminalView
) -> tuple[str, str]:
    """Run one prompt through a `talaria acp` child; returns (stop reason, session id)."""
    from talaria.acp_server.client.core import AcpClient, allow_all, ask_on_terminal

    env = child_env()
    for name, var in (("model", "TALARIA_MODEL"), ("max_turns", "TALARIA_MAX_TURNS")):
        if flags.get(name) is not None:
            env[var] = str(flags[name])
    policy = allow_all if yes else ask_on_terminal
    async with AcpClient(env=env, cwd=cwd, permission=policy, on_update=view.update) as client:
        await client.initialize()
        session_id = await client.new_session(cwd)
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
    from talaria.acp_server.jsonrpc import PeerError, RpcError
    from talaria.agent.providers.errors import ProviderError

    cwd = Path(args.cwd).resolve()
    if not cwd.is_dir():
        print(f"talaria: --cwd {cwd} is not a directory", file=sys.stderr)
        return 2
    flags = {"model": args.model, "mode": args.mode, "max_turns": args.max_turns}
    view = TerminalView(sys.stdout, as_json=args.json)
    try:
        if getattr(args, "acp", False):
            reason, session_id = anyio.run(
                lambda: run_over_acp(args.prompt, cwd=cwd, flags=flags, yes=args.yes, view=view)
            )
        else:
            reason, session_id, _ = anyio.run(
                lambda: run_task(args.prompt, cwd=cwd, flags=flags, yes=args.yes, view=view)
            )
    except ProviderError as exc:
        _error_line(view, exc.user_message())
        return 3
    except RpcError as exc:  # the agent's answer: -32000 no credentials, -32602 a bad flag
        # A model error's message is the whole story (its data is for programs); a bare
        # "Invalid params" needs its data.
        _error_line(view, exc.data if isinstance(exc.data, str) else exc.message)
        return 2 if exc.code == -32602 else 3
    except PeerError as exc:
        _error_line(view, f"the agent stopped answering ({exc})")
        return 2
    except ValueError as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ntalaria: interrupted", file=sys.stderr)
        return 130
    summary = {"stop_reason": reason, "session": session_id, "tool_calls": view.tool_calls,
               "failed_tool_calls": view.failed}
    if args.json:
        print(json.dumps({"type": "summary", **summary}))
    else:
        print(f"\n— {reason}: {view.tool_calls} tool calls ({view.failed} failed), session {session_id}")
    return 0 if reason == "end_turn" else 1
