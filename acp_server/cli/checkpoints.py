"""`talaria checkpoints list|restore N`: the project's checkpoints from the terminal.

The same checkpoints as the editor's `/checkpoints` and `/restore N` (one shadow repository
per project under `$TALARIA_HOME/checkpoints/`); a restore writes to the disk and is itself a
checkpoint, so `talaria checkpoints restore` of it takes it back.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

import anyio

from talaria.acp_server.cli import exits

CLI_SESSION = "cli"
"""The session id restores from the terminal are recorded under."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "checkpoints", help="list or restore the checkpoints taken before turns changed files",
        description="Checkpoints are taken before each turn's first change, in "
                    "$TALARIA_HOME/checkpoints (never in the project's own .git).")
    sub = parser.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", help="the project's checkpoints, newest first")
    listing.add_argument("--cwd", default=".", help="project directory (default: the current "
                         "one, or the nearest one above it that has checkpoints)")
    listing.add_argument("--all", action="store_true", help="every checkpoint, not the latest 20")
    listing.add_argument("--json", action="store_true", help="one JSON object per checkpoint")
    restore = sub.add_parser("restore", help="put the files back as they were at checkpoint N")
    restore.add_argument("number", type=int, help="checkpoint number (see `list`)")
    restore.add_argument("--cwd", default=".", help="project directory (default: as for list)")
    return parser


def run(args: argparse.Namespace) -> int:
    from talaria.agent.checkpoints import CheckpointError, Journal, ShadowRepo
    from talaria.agent.checkpoints.commands import CLI_HINT, LISTED, describe
    from talaria.agent.checkpoints.restore import CLI, restore
    from talaria.agent.config import load_config
    from talaria.tools.local.workspace import LocalWorkspace

    project = Path(args.cwd).resolve()
    if not project.is_dir():
        print(f"talaria: --cwd {project} is not a directory", file=sys.stderr)
        return exits.USAGE
    try:
        config = load_config()
    except ValueError as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return exits.USAGE
    project = _checkpointed(config.home, project)
    repo = ShadowRepo(config.home, project)
    journal = Journal(repo.dir)
    if args.action == "list":
        with repo.locked():
            checkpoints = journal.load()
        if args.json:
            for checkpoint in reversed(checkpoints):
                print(json.dumps(asdict(checkpoint), ensure_ascii=False))
        else:
            print(describe(checkpoints, limit=None if args.all else LISTED, hint=CLI_HINT))
        return exits.DONE
    try:
        reply = anyio.run(lambda: restore(repo, journal, args.number, LocalWorkspace(project),
                                          CLI_SESSION, say=CLI))
    except CheckpointError as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return exits.USAGE
    print(reply)
    return exits.DONE


def _checkpointed(home: Path, folder: Path) -> Path:
    """`folder`, or the nearest folder above it that has checkpoints: run in a subfolder of a
    project, the project's checkpoints are the ones meant."""
    from talaria.agent.checkpoints import checkpoints_dir

    for candidate in (folder, *folder.parents):
        if (checkpoints_dir(home, candidate) / "journal.json").exists():
            return candidate
    return folder
