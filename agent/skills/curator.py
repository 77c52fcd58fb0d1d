"""The curator: keeps the skill library small and useful without ever deleting anything.

`curate` archives agent-written skills (created_by agent or review) unused for `days` days —
never user-written, project or pinned skills — into `.archive/` (history kept; `talaria skills
restore NAME` brings one back), and reports groups of near-duplicates (the same test as
`skill_manage create`) for the user or agent to merge with `delete ... absorbed_into`.
"""

from __future__ import annotations

import calendar
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from talaria.tools.skills.format import Skill
from talaria.tools.skills.guards import near_duplicate
from talaria.tools.skills.store import SkillStore

DAY_S = 86_400
AGENT_AUTHORS = ("agent", "review")


@dataclass(slots=True)
class CurateReport:
    archived: list[str] = field(default_factory=list)
    """Names archived (or, in a dry run, that would be)."""
    duplicates: list[list[str]] = field(default_factory=list)
    """Groups of near-duplicate skills to merge."""


def last_activity(skill: Skill, usage: dict[str, Any]) -> float:
    """When the skill was last used, viewed, changed or created (epoch seconds)."""
    row = usage.get(skill.name, {})
    times = [row.get("last_used"), row.get("last_viewed")]
    for key in ("updated_at", "created_at"):
        stamp = skill.metadata.get(key)
        if isinstance(stamp, str):
            with contextlib.suppress(ValueError):
                times.append(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))
    known = [float(t) for t in times if isinstance(t, int | float)]
    return max(known) if known else (skill.path / "SKILL.md").stat().st_mtime


def curate(store: SkillStore, days: int, *, now: float | None = None, dry_run: bool = False) -> CurateReport:
    now = time.time() if now is None else now
    report = CurateReport()
    usage = store.usage()
    skills = store.scan()
    for skill in sorted(skills.values(), key=lambda s: s.name):
        stale = now - last_activity(skill, usage) > days * DAY_S
        if (stale and skill.source == "user" and not skill.pinned
                and skill.metadata.get("created_by") in AGENT_AUTHORS):
            report.archived.append(skill.name)
            if not dry_run:
                store.archive(skill)
    kept = [s for s in skills.values() if s.name not in report.archived]
    report.duplicates = duplicate_groups(kept)
    return report


def duplicate_groups(skills: list[Skill]) -> list[list[str]]:
    """Connected groups of near-duplicates, each sorted, largest first."""
    parent = {s.name: s.name for s in skills}

    def root(name: str) -> str:
        while parent[name] != name:
            name = parent[name]
        return name

    ordered = sorted(skills, key=lambda s: s.name)
    for i, skill in enumerate(ordered):
        hit = near_duplicate(skill.name, f"{skill.description}\n{skill.body}", ordered[i + 1:])
        while hit is not None:
            other, _ = hit
            parent[root(other.name)] = root(skill.name)
            rest = [s for s in ordered[i + 1:] if root(s.name) != root(skill.name)]
            hit = near_duplicate(skill.name, f"{skill.description}\n{skill.body}", rest)
    groups: dict[str, list[str]] = {}
    for name in parent:
        groups.setdefault(root(name), []).append(name)
    return sorted((sorted(g) for g in groups.values() if len(g) > 1), key=lambda g: (-len(g), g))
