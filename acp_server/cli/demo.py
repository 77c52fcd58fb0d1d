"""`talaria demo`: fix a failing test in a bundled example project, no API key needed.

The demo runs the way an editor runs Talaria: `talaria acp` is a child process and this
process is its editor (`AcpClient`, every tool call allowed). Edits arrive here as
`fs/write_text_file` requests and commands as `terminal/create`. The project is copied to a
scratch directory and a recorded run (`replay:`) drives real tool calls on it: the tests really
fail, the patch really lands, the tests really pass. With `--live`, the configured model does
the same task.
"""

from __future__ import annotations

import argparse
import difflib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

import talaria.agent
from talaria.acp_server.cli import exits
from talaria.acp_server.cli.run import TerminalView, child_env

DEMO = Path(talaria.agent.__file__).resolve().parent / "data" / "demo"


async def drive(prompt: str, project: Path, env: dict[str, str], view: TerminalView) -> tuple[str, str, int]:
    """Run `prompt` in `project` through a `talaria acp` child; (stop reason, session, edits)."""
    from talaria.acp_server.client.core import AcpClient, allow_all

    async with AcpClient(env=env, cwd=project, permission=allow_all, on_update=view.update) as client:
        await client.initialize()
        session_id = await client.open_session(project)
        reason = await client.prompt(session_id, prompt)
        return reason, session_id, len(client.writes)


def demo_cli(args: argparse.Namespace) -> int:
    from talaria.agent.config import load_config

    scenario = json.loads((DEMO / "scenario.json").read_text(encoding="utf-8"))
    model = f"replay:{DEMO / 'scenario.json'}" if not args.live else args.model
    try:
        # Mode "default": every edit and command asks the client, which allows it.
        env = child_env(TALARIA_MODE="default", **({"TALARIA_MODEL": model} if model else {}))
        config = load_config(env=env)
    except ValueError as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return exits.USAGE
    if not config.model:
        print("talaria demo --live needs a model: set TALARIA_MODEL or pass --model", file=sys.stderr)
        return exits.MODEL
    scratch = Path(tempfile.mkdtemp(prefix="talaria-demo-")) / "textstats"
    try:
        return _demo(args, scenario, scratch, env, config)
    finally:
        if not getattr(args, "keep", False):  # one left behind per run otherwise
            shutil.rmtree(scratch.parent, ignore_errors=True)


def _demo(args: argparse.Namespace, scenario: dict, scratch: Path, env: dict[str, str],
          config: Any) -> int:
    from talaria.acp_server.jsonrpc import PeerError, RpcError
    from talaria.agent.store import Store
    from talaria.agent.trajectories.load import write_transcript

    shutil.copytree(DEMO / "project", scratch)
    say = (lambda text: None) if args.json else print
    kept = "kept (--keep)" if getattr(args, "keep", False) else "removed at the end; --keep keeps it"
    say(f"Demo project: {scratch} ({kept})\nTask: {scenario['prompt']}\n")
    view = TerminalView(sys.stdout, as_json=args.json)
    try:
        reason, session_id, edits = anyio.run(drive, scenario["prompt"], scratch, env, view)
    except RpcError as exc:
        print(f"\ntalaria: {exc.data or exc.message}", file=sys.stderr)
        return exits.MODEL
    except PeerError as exc:
        print(f"\ntalaria: the agent stopped answering ({exc})", file=sys.stderr)
        return exits.NOT_DONE
    store = Store(config.home / "sessions.db")
    try:
        trajectory = write_transcript(store, session_id, config.home / "trajectories")
    finally:
        store.close()
    tests = subprocess.run(
        [sys.executable, "-m", "unittest", "-q"], cwd=scratch, capture_output=True, text=True
    )
    diff = _diff(DEMO / "project", scratch)
    if args.json:
        print(json.dumps({"type": "demo", "stop_reason": reason, "tests_pass": tests.returncode == 0,
                          "diff": diff, "edits_via_acp": edits, "trajectory": str(trajectory),
                          "project": str(scratch)}))
    else:
        print(f"\n\n--- diff ---\n{diff or '(no changes)'}")
        print(f"tests: {'pass' if tests.returncode == 0 else 'FAIL'}")
        print(f"edits received as fs/write_text_file: {edits}")
        print(f"trajectory: {trajectory}")
    done = reason == "end_turn" and tests.returncode == 0
    return exits.DONE if done else exits.NOT_DONE


def _diff(before: Path, after: Path) -> str:
    chunks: list[str] = []
    for old in sorted(before.rglob("*.py")):
        new = after / old.relative_to(before)
        a = old.read_text(encoding="utf-8").splitlines(keepends=True)
        b = new.read_text(encoding="utf-8").splitlines(keepends=True) if new.exists() else []
        name = str(old.relative_to(before))
        chunks.extend(difflib.unified_diff(a, b, f"a/{name}", f"b/{name}"))
    return "".join(chunks)
