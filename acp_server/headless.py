"""`talaria run`: one task in the terminal on the local workspace.

Text streams to stdout, a line per tool call shows its status, and a summary ends the run.
`--json` prints every event as a JSON line instead. Exit status 0 on `end_turn`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

import anyio

from agent import events as ev
from agent.permissions import PermissionAsk

STATUS_MARK = {"completed": "✓", "failed": "✗"}


class TerminalView:
    """Renders events for a person (or as JSON lines)."""

    def __init__(self, out: TextIO, *, as_json: bool) -> None:
        self.out = out
        self.as_json = as_json
        self.titles: dict[str, str] = {}
        self.tool_calls = 0
        self.failed = 0
        self.at_line_start = True

    async def __call__(self, event: ev.Event) -> None:
        if self.as_json:
            print(json.dumps(ev.event_to_dict(event), ensure_ascii=False, default=str), file=self.out)
            self.out.flush()
            return
        match event:
            case ev.TextChunk(text=text):
                self._write(text)
            case ev.ToolCallStarted(id=call_id, title=title):
                self.titles[call_id] = title
            case ev.ToolCallFinished(id=call_id, status=status, result=result):
                self.tool_calls += 1
                self.failed += status == "failed"
                detail = f" — {result['error']}" if "error" in result else ""
                self._line(f"{STATUS_MARK.get(status, '?')} {self.titles.get(call_id, call_id)}{detail}")
            case ev.PlanUpdated(entries=entries):
                self._line("plan: " + "; ".join(f"[{e['status']}] {e['content']}" for e in entries))
            case ev.Notice(text=text):
                self._line(f"! {text}")

    def _write(self, text: str) -> None:
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
    from agent.config import load_config
    from agent.runtime import make_provider, new_session, open_store
    from tools.local import LocalWorkspace

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
    from agent.loop import run_turn

    return await run_turn(session, prompt, view)


def run_cli(args: argparse.Namespace) -> int:
    from agent.providers.errors import ProviderError

    cwd = Path(args.cwd).resolve()
    if not cwd.is_dir():
        print(f"talaria: --cwd {cwd} is not a directory", file=sys.stderr)
        return 2
    flags = {"model": args.model, "mode": args.mode, "max_turns": args.max_turns}
    view = TerminalView(sys.stdout, as_json=args.json)
    try:
        reason, session_id, db = anyio.run(
            lambda: run_task(args.prompt, cwd=cwd, flags=flags, yes=args.yes, view=view)
        )
    except ProviderError as exc:
        print(f"\ntalaria: {exc.user_message()}", file=sys.stderr)
        return 3
    except ValueError as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return 2
    summary = {"stop_reason": reason, "session": session_id, "tool_calls": view.tool_calls,
               "failed_tool_calls": view.failed}
    if args.json:
        print(json.dumps({"type": "summary", **summary}))
    else:
        print(f"\n— {reason}: {view.tool_calls} tool calls ({view.failed} failed), session {session_id}")
    return 0 if reason == "end_turn" else 1
