"""`talaria skills list|view|pin|unpin|archive|restore|history|curate|learn`: the user's side
of the skill library (`$TALARIA_HOME/skills/`, plus the current project's skills), or with
`--set NAME` of a skill set (`$TALARIA_HOME/skill-sets/NAME/`; `learn` and the curation by
two runs' verdicts: skill_sets.py)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from talaria.acp_server.cli import exits

ACTIONS = ("list", "view", "pin", "unpin", "archive", "restore", "history", "curate", "learn")


def add_parser(sub: Any) -> None:
    skills = sub.add_parser("skills", help="list, inspect, pin, archive and restore skills",
                            description="The skill library: $TALARIA_HOME/skills/ and the "
                            "project's .talaria/skills and .agents/skills.")
    skills.add_argument("action", choices=ACTIONS)
    skills.add_argument("name", nargs="?", help="the skill (all but list and curate); learn: "
                        "the batch run directory (RUN) whose solved trajectories it learns from")
    skills.add_argument("version", nargs="?", type=int,
                        help="restore: a version from `history` (without: from the archive)")
    skills.add_argument("--cwd", default=".", help="project whose skills are included")
    skills.add_argument("--days", type=int, help="curate: archive agent-written skills unused "
                                                 "this many days (default: skills_curate_days)")
    skills.add_argument("--dry-run", action="store_true", help="curate: only report")
    skills.add_argument("--json", action="store_true", help="list/history/curate/learn as JSON")
    skills.add_argument("--set", metavar="SET", dest="skill_set",
                        help="act on the skill set SET ($TALARIA_HOME/skill-sets/SET) instead")
    skills.add_argument("--into", metavar="SET", help="learn: the skill set to write (made if new)")
    skills.add_argument("--model", help="learn: provider:model of the reviews (default: "
                        "review_model, else model)")
    skills.add_argument("--with", metavar="RUN", dest="with_run",
                        help="curate --set: a batch run made with --skills SET ...")
    skills.add_argument("--baseline", metavar="RUN", help="... and one of the same tasks made "
                        "with --skills none: archive the skills whose tasks did not do better")


def run(args: argparse.Namespace) -> int:
    from talaria.agent.config import load_config
    from talaria.agent.skills.setup import skill_store
    from talaria.tools.skills.format import SkillFormatError
    from talaria.tools.skills.store import SkillError

    try:
        config = load_config()
    except ValueError as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return exits.USAGE
    from talaria.acp_server.cli import skill_sets

    if args.action == "learn" or args.with_run or args.baseline:
        return skill_sets.run(args, config)
    try:
        store = skill_sets.store(args, config) or skill_store(config, Path(args.cwd).resolve())
    except SkillError as exc:
        print(f"talaria skills {args.action}: {exc}", file=sys.stderr)
        return exits.USAGE
    if args.action not in ("list", "curate") and not args.name:
        print(f"talaria skills {args.action}: name the skill (see `talaria skills list`)", file=sys.stderr)
        return exits.USAGE
    try:
        return _ACTIONS[args.action](store, args, config)
    except (SkillError, SkillFormatError, OSError) as exc:
        print(f"talaria skills {args.action}: {exc}", file=sys.stderr)
        return exits.USAGE


def _list(store: Any, args: argparse.Namespace, config: Any) -> int:
    from talaria.tools.skills.sets import provenance

    usage = store.usage()
    rows = [{"name": s.name, "description": s.description, "source": s.source,
             "category": s.category, "pinned": s.pinned,
             "created_by": s.metadata.get("created_by", "user"),
             "uses": usage.get(s.name, {}).get("uses", 0), "path": str(s.path),
             **({"shadows": s.shadows} if s.shadows else {}),
             **({"learned_from": learned} if (learned := provenance(s.path)) else {})}
            for s in sorted(store.scan().values(), key=lambda s: s.name)]
    if args.json:
        print(json.dumps(rows, indent=1))
    for r in [] if args.json else rows:
        flags = " [pinned]" if r["pinned"] else ""
        flags += " (shadows a user skill)" if r.get("shadows") else ""
        if tasks := sorted({str(e.get("task")) for e in r.get("learned_from") or ()}):
            flags += f" (learned from {', '.join(tasks)})"
        print(f"{r['name']}{flags} — {r['description'][:90]}  ({r['source']}, by {r['created_by']}, "
              f"used {r['uses']}×)")
    for problem in store.problems:
        print(f"not loaded: {problem}", file=sys.stderr)
    if not rows and not args.json:
        print(f"no skills yet: add {store.user_root}/NAME/SKILL.md")
    return exits.DONE


def _view(store: Any, args: argparse.Namespace, config: Any) -> int:
    print((store.require(args.name).path / "SKILL.md").read_text(encoding="utf-8"), end="")
    return exits.DONE


def _pin(store: Any, args: argparse.Namespace, config: Any) -> int:
    from talaria.tools.skills.format import parse, render

    skill = store.require(args.name)
    path = skill.path / "SKILL.md"
    meta, body = parse(path.read_text(encoding="utf-8"), skill.path.name)
    meta["metadata"] = {**(meta.get("metadata") or {}), "updated_by": "user"}
    if args.action == "pin":
        meta["metadata"]["pinned"] = "true"
    else:
        meta["metadata"].pop("pinned", None)
    path.write_text(render(meta, body), encoding="utf-8")
    store.commit(skill.path, by="user", action=args.action)
    print(f"{args.action}ned {args.name}")
    return exits.DONE


def _archive(store: Any, args: argparse.Namespace, config: Any) -> int:
    skill = store.require(args.name)
    if skill.pinned:
        print(f"talaria skills archive: {args.name} is pinned; unpin it first", file=sys.stderr)
        return exits.USAGE
    print(f"archived {args.name} to {store.archive(skill)}")
    return exits.DONE


def _restore(store: Any, args: argparse.Namespace, config: Any) -> int:
    if args.version is None:
        print(f"restored {args.name} to {store.unarchive(args.name)}")
    else:
        number = store.restore_version(args.name, args.version)
        print(f"restored version {args.version} of {args.name} as version {number}")
    return exits.DONE


def _history(store: Any, args: argparse.Namespace, config: Any) -> int:
    rows = store.history(args.name)
    if args.json:
        print(json.dumps(rows, indent=1))
        return exits.DONE
    for r in rows:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r["at"])) if r.get("at") else "?"
        print(f"{r['version']:>4}  {when}  {r.get('by', '?'):<6}  {r.get('action', '')}")
    return exits.DONE


def _curate(store: Any, args: argparse.Namespace, config: Any) -> int:
    from talaria.agent.skills.curator import curate

    days = args.days or config.skills_curate_days
    report = curate(store, days, dry_run=args.dry_run)
    if args.json:
        print(json.dumps({"archived": report.archived, "duplicates": report.duplicates,
                          "dry_run": args.dry_run}))
        return exits.DONE
    verb = "would archive" if args.dry_run else "archived"
    print(f"{verb} {len(report.archived)} agent-written skill(s) unused for {days} days"
          + (f": {', '.join(report.archived)}" if report.archived else ""))
    for group in report.duplicates:
        print(f"near-duplicates: {', '.join(group)} — merge with skill_manage delete "
              f"absorbed_into=<the one to keep>")
    return exits.DONE


_ACTIONS = {"list": _list, "view": _view, "pin": _pin, "unpin": _pin, "archive": _archive,
            "restore": _restore, "history": _history, "curate": _curate}
