"""`talaria demo`: fix a failing test in a bundled example project, no API key needed.

The project is copied to a scratch directory and a recorded run (`replay:`) drives real tool
calls on it: the tests really fail, the patch really lands, the tests really pass. With
`--live`, the configured model does the same task.
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

import anyio

from acp_server.headless import TerminalView, run_task

DEMO = Path(__file__).resolve().parent.parent / "agent" / "data" / "demo"


def demo_cli(args: argparse.Namespace) -> int:
    from agent.config import load_config, talaria_home
    from agent.providers.errors import ProviderError
    from agent.store import Store
    from agent.trajectory import write_transcript

    scenario = json.loads((DEMO / "scenario.json").read_text(encoding="utf-8"))
    scratch = Path(tempfile.mkdtemp(prefix="talaria-demo-")) / "textstats"
    shutil.copytree(DEMO / "project", scratch)
    model = args.model if args.live else f"replay:{DEMO / 'scenario.json'}"
    if args.live and not (model or load_config().model):
        print("talaria demo --live needs a model: set TALARIA_MODEL or pass --model", file=sys.stderr)
        return 2
    say = (lambda text: None) if args.json else print
    say(f"Demo project: {scratch}\nTask: {scenario['prompt']}\n")
    view = TerminalView(sys.stdout, as_json=args.json)
    try:
        reason, session_id, db = anyio.run(
            lambda: run_task(scenario["prompt"], cwd=scratch, flags={"model": model},
                             yes=True, view=view)
        )
    except ProviderError as exc:
        print(f"\ntalaria: {exc.user_message()}", file=sys.stderr)
        return 3
    store = Store(db)
    try:
        trajectory = write_transcript(store, session_id, talaria_home() / "trajectories")
    finally:
        store.close()
    tests = subprocess.run(
        [sys.executable, "-m", "unittest", "-q"], cwd=scratch, capture_output=True, text=True
    )
    diff = _diff(DEMO / "project", scratch)
    if args.json:
        print(json.dumps({"type": "demo", "stop_reason": reason, "tests_pass": tests.returncode == 0,
                          "diff": diff, "trajectory": str(trajectory), "project": str(scratch)}))
    else:
        print(f"\n\n--- diff ---\n{diff or '(no changes)'}")
        print(f"tests: {'pass' if tests.returncode == 0 else 'FAIL'}")
        print(f"trajectory: {trajectory}")
    return 0 if reason == "end_turn" and tests.returncode == 0 else 1


def _diff(before: Path, after: Path) -> str:
    chunks = []
    for old in sorted(before.rglob("*.py")):
        new = after / old.relative_to(before)
        a = old.read_text(encoding="utf-8").splitlines(keepends=True)
        b = new.read_text(encoding="utf-8").splitlines(keepends=True) if new.exists() else []
        name = str(old.relative_to(before))
        chunks.extend(difflib.unified_diff(a, b, f"a/{name}", f"b/{name}"))
    return "".join(chunks)
