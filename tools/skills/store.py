"""Where skills live, and every change to them kept.

User skills: `$TALARIA_HOME/skills/[category/]NAME/`. Project skills: `<project>/.talaria/
skills/` then `<project>/.agents/skills/` (same layout); they are read-only to the agent unless
the user allows writes there (`project_skill_writes`). A project skill shadows a user skill of
the same name, and `Skill.shadows` says which. A store over a skill set (`root`: see sets.py)
has that folder in place of the user's skills, and no project skills.

Every write snapshots the whole skill folder as a new version in `NAME/.history/NNNN/` (with
`version.json`: who, when, what), so nothing is lost: `restore_version` brings one back as a
newer version. `delete` and `archive` move the folder, history and all, into `.archive/` of
its root. Usage (views, uses, last use) is kept in `skills/.usage.json`, shared by processes.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from talaria.tools.lockfile import locked, read_text, write_atomic
from talaria.tools.skills.format import Skill, SkillFormatError, load

log = logging.getLogger(__name__)

HISTORY = ".history"
ARCHIVE = ".archive"
USAGE = ".usage.json"
PROJECT_DIRS = (".talaria/skills", ".agents/skills")


class SkillError(ValueError):
    """A skill operation that cannot be done; the message says what to do instead."""


@dataclass(slots=True)
class SkillStore:
    home: Path
    """$TALARIA_HOME."""
    project: Path | None = None
    project_writes: bool = False
    problems: list[str] = field(default_factory=list)
    """Skills found but not loaded, and why (from the last `scan`)."""
    root: Path | None = None
    """A skill set's folder: the whole library (None: `home/skills` and the project's)."""

    @property
    def user_root(self) -> Path:
        return self.root if self.root is not None else self.home / "skills"

    def roots(self) -> list[tuple[Path, str]]:
        """(root, source), lowest precedence first."""
        roots = [(self.user_root, "user")]
        if self.project is not None and self.root is None:
            roots += [(self.project / d, "project") for d in reversed(PROJECT_DIRS)]
        return roots

    def scan(self) -> dict[str, Skill]:
        """Every loadable skill by name (a project skill over a same-named user skill)."""
        found: dict[str, Skill] = {}
        self.problems = []
        for root, source in self.roots():
            for folder, category in _folders(root):
                try:
                    skill = load(folder, source=source, category=category,
                                 writable=source == "user" or self.project_writes)
                except (SkillFormatError, OSError, UnicodeDecodeError) as exc:
                    self.problems.append(f"{folder}: {exc}")
                    # Reported by /skills and `talaria skills list`; every scan would repeat it.
                    log.info("skill %s not loaded: %s", folder, exc)
                    continue
                if (hidden := found.get(skill.name)) is not None:
                    skill.shadows = [*hidden.shadows, str(hidden.path)]
                found[skill.name] = skill
        return found

    def get(self, name: str) -> Skill | None:
        return self.scan().get(name)

    def require(self, name: str) -> Skill:
        skill = self.get(name)
        if skill is None:
            known = ", ".join(sorted(self.scan())) or "none yet"
            raise SkillError(f"no skill named {name!r} (skills: {known})")
        return skill

    def new_folder(self, name: str, category: str | None) -> Path:
        return self.user_root / category / name if category else self.user_root / name

    # -- history ----------------------------------------------------------------------

    def commit(self, folder: Path, *, by: str, action: str, session: str = "") -> int:
        """Snapshot the skill folder as its next version; returns the version number."""
        history = folder / HISTORY
        number = max(versions(folder), default=0) + 1
        target = history / f"{number:04d}"
        shutil.copytree(folder, target, ignore=shutil.ignore_patterns(HISTORY))
        (target / "version.json").write_text(json.dumps(
            {"version": number, "by": by, "action": action, "session": session, "at": time.time()}))
        return number

    def history(self, name: str) -> list[dict[str, Any]]:
        skill = self.require(name)
        rows = []
        for number in versions(skill.path):
            try:
                rows.append(json.loads((skill.path / HISTORY / f"{number:04d}" / "version.json").read_text()))
            except (OSError, ValueError):
                rows.append({"version": number})
        return rows

    def restore_version(self, name: str, version: int, *, by: str = "user") -> int:
        """Make version `version` current again (as a new version); returns the new number."""
        skill = self.require(name)
        source = skill.path / HISTORY / f"{version:04d}"
        if not source.is_dir():
            raise SkillError(f"{name} has no version {version}; versions: "
                             f"{', '.join(map(str, versions(skill.path))) or 'none'}")
        for item in skill.path.iterdir():
            if item.name != HISTORY:
                shutil.rmtree(item) if item.is_dir() else item.unlink()
        for item in source.iterdir():
            if item.name == "version.json":
                continue
            copy = shutil.copytree if item.is_dir() else shutil.copy2
            copy(item, skill.path / item.name)
        return self.commit(skill.path, by=by, action=f"restore {version}")

    # -- archive ------------------------------------------------------------------------

    def archive(self, skill: Skill) -> Path:
        """Move a skill (history included) into its root's `.archive/`; returns where."""
        root = next((r for r, _ in self.roots() if r in skill.path.parents), skill.path.parent)
        target = root / ARCHIVE / skill.name
        if target.exists():
            target = target.with_name(f"{skill.name}-{time.strftime('%Y%m%d-%H%M%S')}")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(skill.path), str(target))
        return target

    def archived(self) -> list[Path]:
        return sorted(p for p in (self.user_root / ARCHIVE).glob("*") if (p / "SKILL.md").is_file())

    def unarchive(self, name: str) -> Path:
        """Bring back the newest archived copy of `name` (to the user root)."""
        matches = [p for p in self.archived() if p.name == name or p.name.startswith(f"{name}-2")]
        if not matches:
            raise SkillError(f"no archived skill named {name!r}")
        if self.get(name) is not None:
            raise SkillError(f"a skill named {name!r} exists; archive or rename it first")
        source = max(matches, key=lambda p: p.stat().st_mtime)
        target = self.user_root / name
        shutil.move(str(source), str(target))
        return target

    # -- usage ----------------------------------------------------------------------------

    @property
    def usage_path(self) -> Path:
        return self.user_root / USAGE

    def usage(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(read_text(self.usage_path) or "{}")
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    def record(self, name: str, *, view: bool = False, use: bool = False) -> None:
        """Count a view or a use of `name` (safe with other processes counting too)."""
        with locked(self.usage_path):
            data = self.usage()
            row = data.setdefault(name, {"views": 0, "uses": 0, "last_used": None})
            now = time.time()
            if view:
                row["views"] = int(row.get("views", 0)) + 1
                row["last_viewed"] = now
            if use:
                row["uses"] = int(row.get("uses", 0)) + 1
                row["last_used"] = now
            write_atomic(self.usage_path, json.dumps(data, indent=1, sort_keys=True))


def versions(folder: Path) -> list[int]:
    history = folder / HISTORY
    return sorted(int(p.name) for p in history.glob("[0-9]*") if p.name.isdigit())


def _folders(root: Path) -> list[tuple[Path, str | None]]:
    """Skill folders under `root`: NAME/ or CATEGORY/NAME/ (hidden folders skipped)."""
    if not root.is_dir():
        return []
    found: list[tuple[Path, str | None]] = []
    for entry in sorted(root.iterdir()):
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        if (entry / "SKILL.md").is_file():
            found.append((entry, None))
            continue
        for inner in sorted(entry.iterdir()):
            if not inner.name.startswith(".") and (inner / "SKILL.md").is_file():
                found.append((inner, entry.name))
    return found

