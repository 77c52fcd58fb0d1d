"""Skill sets: named skill libraries learned from runs, kept apart from the user's skills.

    $TALARIA_HOME/skill-sets/NAME/            one set: the layout of $TALARIA_HOME/skills/
        SKILL-NAME/SKILL.md                   (history, .archive/, .usage.json alike)
        SKILL-NAME/provenance.json            where it was learned: [{run, task, attempt,
                                              action, at}], one entry per write
        set.json                              the set's ledger: {name, learned: [{run, model,
                                              tasks, changes, at}]}

`talaria skills learn RUN --into NAME` makes and grows a set (agent.skills.learn); `talaria
batch --skills NAME` runs tasks with it (read-only) and `--skills none` with no skills at all;
`talaria skills curate --set NAME --with RUN --baseline RUN` archives the skills that did not
help (agent.skills.measure). A set holds the whole library of a session that uses it: no user
or project skill is mixed in, so what a run measures is the set.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from talaria.tools.lockfile import locked, read_text, write_atomic
from talaria.tools.skills.store import SkillError, versions

SETS = "skill-sets"
"""The folder of `$TALARIA_HOME` the sets live in."""
LEDGER = "set.json"
PROVENANCE = "provenance.json"
NONE = "none"
"""`--skills none`: a run with no skills at all (the baseline a set is measured against)."""
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def check_set_name(name: str) -> str:
    """`name` if it can name a set (a plain folder name, not `none`), else SkillError."""
    if name == NONE:
        raise SkillError("`none` means no skills at all; give the set another name")
    if not NAME_RE.match(name or ""):
        raise SkillError(f"skill set name {name!r}: use letters, digits, '.', '_' and '-' "
                         "(at most 64, starting with a letter or digit)")
    return name


def set_path(home: Path, name: str) -> Path:
    return home / SETS / check_set_name(name)


def known_sets(home: Path) -> list[str]:
    root = home / SETS
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def require_set(home: Path, name: str) -> Path:
    """The folder of an existing set, else SkillError naming the sets there are."""
    path = set_path(home, name)
    if not path.is_dir():
        known = ", ".join(known_sets(home)) or "none yet"
        raise SkillError(f"no skill set {name!r} in {home / SETS} (sets: {known}); make one "
                         f"with `talaria skills learn RUN --into {name}`")
    return path


def contents(path: Path) -> dict[str, int]:
    """{skill name: current version} of a set (what a run that uses it ran with)."""
    return {folder.name: max(versions(folder), default=0)
            for folder in sorted(path.iterdir())
            if folder.is_dir() and not folder.name.startswith(".") and (folder / "SKILL.md").is_file()}


def ledger(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_text(path / LEDGER) or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def add_to_ledger(path: Path, entry: dict[str, Any]) -> None:
    """Append what one `learn` did to the set's ledger (safe with other processes)."""
    with locked(path / LEDGER):
        data = ledger(path)
        data["name"] = path.name
        data["learned"] = [*(data.get("learned") or []), entry]
        write_atomic(path / LEDGER, json.dumps(data, indent=1))


def note_provenance(folder: Path, provenance: dict[str, Any], action: str) -> None:
    """Record in a skill's folder which run and task a write came from (before its version is
    committed, so every version carries the provenance it had)."""
    path = folder / PROVENANCE
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        entries = []
    if not isinstance(entries, list):
        entries = []
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    entries.append({**provenance, "action": action, "at": stamp})
    path.write_text(json.dumps(entries, indent=1), encoding="utf-8")


def provenance(folder: Path) -> list[dict[str, Any]]:
    """A skill's provenance entries ([] for one not learned from a run)."""
    try:
        entries = json.loads((folder / PROVENANCE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
