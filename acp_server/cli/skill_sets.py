"""`talaria skills learn RUN --into SET` and `talaria skills curate --set SET --with RUN
--baseline RUN`: skill sets learned from runs, and kept only where they help.

    talaria skills learn data/teacher --into harbor     # reviews of each solved trajectory
    talaria batch TASKS --run-name with --skills harbor
    talaria batch TASKS --run-name without --skills none
    talaria trajectories compare data/with data/without # the run-level answer
    talaria skills curate --set harbor --with data/with --baseline data/without

Bad input (an unknown set, a missing run, a run with nothing solved, runs that share no task
or were not made with the set and with none) is one line, exit 2, and nothing is changed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from talaria.acp_server.cli import exits


def store(args: argparse.Namespace, config: Any) -> Any:
    """A store over `--set` (None without it); SkillError for an unknown set."""
    if not args.skill_set:
        return None
    from talaria.tools.skills.sets import require_set
    from talaria.tools.skills.store import SkillStore

    return SkillStore(config.home, root=require_set(config.home, args.skill_set))


def run(args: argparse.Namespace, config: Any) -> int:
    from talaria.agent.skills.learn import LearnError
    from talaria.agent.skills.measure import MeasureError
    from talaria.tools.skills.store import SkillError

    try:
        if args.action == "learn":
            return _learn(args, config)
        return _curate(args, config)
    except (LearnError, MeasureError, SkillError, OSError) as exc:
        print(f"talaria skills {args.action}: {exc}", file=sys.stderr)
        return exits.USAGE


def _learn(args: argparse.Namespace, config: Any) -> int:
    import anyio

    from talaria.agent.providers.errors import AuthError
    from talaria.agent.skills.learn import learn, read_run
    from talaria.tools.skills.sets import set_path

    if not args.name or not args.into:
        print("talaria skills learn: give the run and the set: talaria skills learn RUN "
              "--into SET", file=sys.stderr)
        return exits.USAGE
    folder = set_path(config.home, args.into)  # a bad name: nothing made
    read_run(Path(args.name))  # a missing or unreadable run: nothing made
    try:
        report = anyio.run(learn, Path(args.name), folder, config, args.model)
    except AuthError as exc:  # no model, or its key refused: every review would fail alike
        print(f"talaria skills learn: {exc}", file=sys.stderr)
        return exits.MODEL
    failed = [t for t in report.tasks if t.error]
    if args.json:
        print(json.dumps({"set": args.into, "path": str(folder), "run": str(report.run),
                          "model": report.model, "attempts": report.read,
                          "tasks": [{"task_id": t.task_id, "attempt": t.attempt,
                                     "changes": t.changes, "error": t.error}
                                    for t in report.tasks]}, indent=1))
    else:
        for task in report.tasks:
            did = "; ".join(task.changes) or "nothing saved"
            print(f"{task.task_id}: {did}" + (f" (review failed: {task.error})" if task.error else ""))
        saved = sum(len(t.changes) for t in report.tasks)
        print(f"learned from {len(report.tasks)} solved task(s) of {report.run}: {saved} "
              f"change(s) to skill set {args.into} ({folder})", file=sys.stderr)
    return exits.NOT_DONE if failed else exits.DONE


def _curate(args: argparse.Namespace, config: Any) -> int:
    from talaria.agent.skills.measure import curate_by_runs, judge

    if not (args.skill_set and args.with_run and args.baseline) or args.action != "curate":
        print("talaria skills: judging a set takes all of: curate --set SET --with RUN "
              "--baseline RUN", file=sys.stderr)
        return exits.USAGE
    skills = store(args, config)
    verdicts = judge(skills, args.skill_set, Path(args.with_run), Path(args.baseline))
    archived = curate_by_runs(skills, verdicts, dry_run=args.dry_run)
    if args.json:
        print(json.dumps({"set": args.skill_set, "skills": [v.to_dict() for v in verdicts],
                          "archived": archived, "dry_run": args.dry_run}, indent=1))
        return exits.DONE
    for v in verdicts:
        if v.beats is None:
            print(f"{v.name}: not used by the run with the set (kept)")
            continue
        fate = ("kept" if v.beats else "would archive" if args.dry_run else "archived")
        if v.name not in archived and not v.beats:
            fate = "kept (pinned)"
        print(f"{v.name}: used on {len(v.tasks)} task(s); resolved {v.with_set:.2f} with the "
              f"set vs {v.baseline:.2f} without: {fate}")
    verb = "would archive" if args.dry_run else "archived"
    print(f"{verb} {len(archived)} of {len(verdicts)} skill(s) of {args.skill_set} that did not "
          "beat the baseline" + (f": {', '.join(archived)}" if archived else ""), file=sys.stderr)
    return exits.DONE
