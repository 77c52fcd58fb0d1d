"""`talaria trajectories`: export and view recorded runs.

    talaria trajectories export SESSION|FILE... [--format sharegpt|openai|atif] [-o OUT]
                                [--solved-only] [--min-reward X]
    talaria trajectories view SESSION|FILE|DIR [-o OUT.html]
    talaria trajectories compare RUN_A RUN_B [RUN ...] [-o OUT.html]   (compare.py)

SESSION is a session id (or a unique prefix of one) in `$TALARIA_HOME/sessions.db`; FILE a
transcript JSONL (`$TALARIA_HOME/trajectories/ID.jsonl`) or a ShareGPT export; DIR a batch run
(`data/NAME/` with trajectories.jsonl and statistics.json). Exports go to stdout without -o;
every line of a ShareGPT FILE (a batch's trajectories.jsonl) becomes one record, in order, or
the command fails naming the lines it cannot convert (exit 2, nothing written).
`--solved-only` / `--min-reward X` keep the trajectories a verifier passed (a batch line's
`resolved` / `reward`); a filter that keeps none is one line, exit 2, nothing written. ATIF is
one pretty document for one trajectory read, one document per line for more.
`view` writes FILE.html beside a file, DIR/report.html in a batch dir, ./ID.html for a
session. Imports are lazy: `talaria acp` never pays for this module.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

FORMATS = ("sharegpt", "openai", "atif")
PREFIX_SCAN_LIMIT = 10_000


class UsageError(Exception):
    """A source that cannot be found or read; worded for the user."""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `trajectories` command (with `export` and `view`) to a subparsers object."""
    parser = subparsers.add_parser(
        "trajectories", help="export, view, compare or compress recorded runs",
        description="Recorded runs: sessions in $TALARIA_HOME/sessions.db, transcript and "
        "ShareGPT files, batch run directories.")
    _add_subcommands(parser)
    return parser


def _add_subcommands(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="trajectories_command", required=True)
    export = sub.add_parser("export", help="write runs as ShareGPT, OpenAI or ATIF (secrets redacted)")
    export.add_argument("sources", nargs="+", metavar="SESSION|FILE")
    export.add_argument("--format", choices=FORMATS, default="sharegpt",
                        help="sharegpt (Hermes JSONL, default), openai (JSONL), atif (JSON)")
    export.add_argument("-o", "--output", metavar="OUT", help="output file (default: stdout)")
    export.add_argument("--solved-only", action="store_true",
                        help="only trajectories whose check passed (a batch line's resolved)")
    export.add_argument("--min-reward", type=float, metavar="X",
                        help="only trajectories whose verifier reward is at least X (0 to 1)")
    view = sub.add_parser("view", help="write a self-contained HTML page of a run or a batch")
    view.add_argument("source", metavar="SESSION|FILE|DIR")
    view.add_argument("-o", "--output", metavar="OUT.html", help="where to write the page")
    from talaria.acp_server.cli.batch import add_compress_parser
    from talaria.acp_server.cli.compare import add_compare_parser

    add_compress_parser(sub)
    add_compare_parser(sub)


def run(args: argparse.Namespace) -> int:
    try:
        if args.trajectories_command == "export":
            return _export(args)
        if args.trajectories_command == "compress":
            from talaria.acp_server.cli.batch import run_compress

            return run_compress(args)
        if args.trajectories_command == "compare":
            from talaria.acp_server.cli.compare import run_compare

            return run_compare(args)
        return _view(args)
    except UsageError as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    """`python -m talaria.acp_server.cli.trajectories export|view ...` (same as `talaria trajectories`)."""
    parser = argparse.ArgumentParser(prog="talaria trajectories")
    _add_subcommands(parser)
    return run(parser.parse_args(argv))


def _export(args: argparse.Namespace) -> int:
    """Every trajectory of every source (each line of a ShareGPT or batch file), or none."""
    from talaria.agent.trajectories.export import ExportError, ToolCatalog, export, select

    if args.min_reward is not None and not 0 <= args.min_reward <= 1:
        raise UsageError(f"--min-reward {args.min_reward:g}: a reward is between 0 and 1")
    read = [traj for source in args.sources for traj in load_all(source)]
    trajectories = select(read, solved_only=args.solved_only, min_reward=args.min_reward)
    if not trajectories:
        raise UsageError(_no_match(read, args))
    try:
        # Many read, one kept by a filter: still a line, as the others would have been.
        text = export(trajectories, args.format, ToolCatalog.builtin(), _prices(),
                      lines=len(read) > 1)
    except ExportError as exc:
        raise UsageError(str(exc)) from exc
    if args.output:
        _write(Path(args.output), text)
    else:
        sys.stdout.write(text)
    left = len(read) - len(trajectories)
    print(f"exported {len(trajectories)} trajectory(ies) as {args.format}"
          + (f" to {args.output}" if args.output else "")
          + (f" ({left} left out by the filter)" if left else ""), file=sys.stderr)
    return 0


def _no_match(read: list[Any], args: argparse.Namespace) -> str:
    """Why a filter kept nothing, in one line."""
    wanted = " and ".join(w for w in ("--solved-only" if args.solved_only else "",
                                      f"--min-reward {args.min_reward:g}"
                                      if args.min_reward is not None else "") if w)
    checked = sum(t.extra.get("reward") is not None or t.extra.get("resolved") is not None
                  for t in read)
    why = (f"{checked} of them have a verdict" if checked
           else "none has a verdict (only a batch run with checks gives one)")
    return f"no trajectory matches {wanted}: {len(read)} read, {why}; nothing was written"


def _prices() -> dict[str, Any]:
    """config.toml's [prices], for each record's cost."""
    from talaria.agent.config import load_config

    try:
        return load_config().prices
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def _view(args: argparse.Namespace) -> int:
    path = Path(args.source)
    if path.exists() and _is_batch(path):
        from talaria.agent.trajectories.model import TrajectoryNotFound
        from talaria.agent.trajectories.report import load_batch, render_batch

        try:
            html = render_batch(*load_batch(path))
        except TrajectoryNotFound as exc:  # a bad or cut line: named, as export names it
            raise UsageError(str(exc)) from exc
        default = path / "report.html" if path.is_dir() else path.with_suffix(".html")
    else:
        from talaria.agent.trajectories.view import render_trajectory

        traj = load(args.source)
        html = render_trajectory(traj)
        default = path.with_suffix(".html") if path.is_file() else Path(f"{traj.session_id}.html")
    out = Path(args.output) if args.output else default
    _write(out, html)
    print(out)
    return 0


def load(source: str) -> Any:
    """A Trajectory from a file path (its first), or from the session store by id or prefix."""
    return load_all(source, first=True)[0]


def load_all(source: str, *, first: bool = False) -> list[Any]:
    """Every Trajectory of a file (one per ShareGPT line), or the session with that id."""
    from talaria.agent.trajectories.load import (
        load_trajectory,
        load_trajectory_file,
        load_trajectory_rows,
    )
    from talaria.agent.trajectories.model import TrajectoryNotFound

    path = Path(source)
    try:
        if path.is_file():
            return [load_trajectory_file(path)] if first else load_trajectory_rows(path)
        if path.is_dir():
            raise UsageError(f"{source} is a directory; `view` takes batch dirs, `export` files")
        store = _store()
        try:
            return [load_trajectory(store, _session_id(store, source))]
        finally:
            store.close()
    except TrajectoryNotFound as exc:
        raise UsageError(str(exc)) from exc


def _store() -> Any:
    from talaria.agent.config import load_config
    from talaria.agent.store import Store

    try:
        home = load_config().home
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    db = home / "sessions.db"
    if not db.is_file():  # do not create an empty store just to look into it
        raise UsageError(f"no such file, and no session store at {db}")
    return Store(db)


def _session_id(store: Any, wanted: str) -> str:
    if store.get_session(wanted) is not None:
        return wanted
    matches = [s.id for s in store.list_sessions(limit=PREFIX_SCAN_LIMIT) if s.id.startswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise UsageError(f"{wanted!r} matches {len(matches)} sessions: {', '.join(matches[:5])}")
    raise UsageError(f"no file {wanted!r} and no session with that id in {store.path}")


def _is_batch(path: Path) -> bool:
    from talaria.agent.trajectories.report import is_batch

    try:
        return is_batch(path)
    except (OSError, UnicodeDecodeError):
        return False


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


if __name__ == "__main__":
    sys.exit(main())
