"""One SKILL.md: YAML frontmatter between `---` lines, then a markdown body.

The frontmatter is parsed with PyYAML's safe loader (a hand-rolled parser breaks on the
quoting, folding and lists real skills use). Checks follow the Agent Skills spec: `name` is
1-64 lowercase letters, digits and hyphens (no leading, trailing or double hyphen) and equals
the folder name; `description` is 1-1,024 characters; `license`, `compatibility`,
`metadata` (a mapping) and `allowed-tools` are optional. A key that misspells one of these is
an error naming the one meant; other keys are kept.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from talaria.tools.keys import closest, unknown_key

NAME_MAX = 64
DESCRIPTION_MAX = 1_024
COMPATIBILITY_MAX = 500
SKILL_MD_MAX = 30_000
"""Characters of a SKILL.md the agent may write (a longer one belongs in references/)."""
SUPPORT_FILE_MAX = 200_000
"""Characters of one supporting file the agent may write."""
SUPPORT_DIRS = ("references", "templates", "scripts", "assets")
KNOWN_KEYS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
NEAR_MISS = 0.8
"""A key this close to a known one (`allowed_tools`, `licence`, `descripton`) is a typo and an
error; other keys (other tools' own, such as `version`) are kept as they are."""
NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


@cache
def _yaml() -> Any:
    """PyYAML, imported on the first SKILL.md (~20 ms a session with no skill does not pay)."""
    import yaml

    return yaml


def _load(text: str) -> Any:
    """Safe YAML, in C when libyaml is there (a 100-skill scan: 5x faster)."""
    yaml = _yaml()
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


class SkillFormatError(ValueError):
    """A SKILL.md that does not follow the format; the message says what to fix."""


@dataclass(slots=True)
class Skill:
    name: str
    description: str
    body: str
    frontmatter: dict[str, Any]
    path: Path
    """The skill's folder."""
    source: str = "user"
    """user or project."""
    category: str | None = None
    writable: bool = True
    shadows: list[str] = field(default_factory=list)
    """Folders of same-named skills this one hides (a project skill over a user skill)."""

    @property
    def metadata(self) -> dict[str, Any]:
        meta = self.frontmatter.get("metadata")
        return meta if isinstance(meta, dict) else {}

    @property
    def pinned(self) -> bool:
        return str(self.metadata.get("pinned", "")).lower() == "true"


def check_name(name: Any) -> str:
    """`name` if it is a valid skill name, else SkillFormatError saying why."""
    if not isinstance(name, str) or not name:
        raise SkillFormatError("a skill needs a name: lowercase letters, digits and hyphens")
    if len(name) > NAME_MAX:
        raise SkillFormatError(f"skill name {name[:80]!r} is longer than {NAME_MAX} characters")
    if not NAME_RE.match(name):
        raise SkillFormatError(
            f"skill name {name!r} may use only lowercase letters, digits and single hyphens "
            "(no leading or trailing hyphen), e.g. fix-flaky-pytest")
    return name


def parse(text: str, folder: str | None = None) -> tuple[dict[str, Any], str]:
    """(frontmatter, body) of a SKILL.md; SkillFormatError when it breaks the format.
    `folder`: the directory name, which the `name` must equal."""
    match = _FRONTMATTER.match(text.lstrip("\ufeff"))
    if match is None:
        raise SkillFormatError(
            "SKILL.md must start with YAML frontmatter: a '---' line, 'name: ...', "
            "'description: ...', and a closing '---' line")
    try:
        meta = _load(match.group(1))
    except _yaml().YAMLError as exc:
        meta = _lenient(match.group(1))
        if meta is None:
            raise SkillFormatError(f"the frontmatter is not valid YAML: {_one_line(exc)}") from None
    if not isinstance(meta, dict):
        raise SkillFormatError("the frontmatter must be a YAML mapping (name: ..., description: ...)")
    check(meta, folder)
    return meta, text[match.end():].lstrip("\n")


def check(meta: dict[str, Any], folder: str | None = None) -> None:
    """Raise SkillFormatError when frontmatter fields break the spec."""
    for key in meta:
        if key not in KNOWN_KEYS and closest(str(key), KNOWN_KEYS, NEAR_MISS):
            raise SkillFormatError(f"frontmatter: {unknown_key(str(key), KNOWN_KEYS)}")
    name = check_name(meta.get("name"))
    if folder is not None and name != folder:
        raise SkillFormatError(f"name {name!r} must equal its folder name {folder!r}")
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillFormatError("a skill needs a description: what it does and when to use it")
    if len(description) > DESCRIPTION_MAX:
        raise SkillFormatError(
            f"description has {len(description)} characters; at most {DESCRIPTION_MAX}")
    compatibility = meta.get("compatibility")
    if compatibility is not None and (not isinstance(compatibility, str)
                                      or len(compatibility) > COMPATIBILITY_MAX):
        raise SkillFormatError(f"compatibility must be text of at most {COMPATIBILITY_MAX} characters")
    if "metadata" in meta and not isinstance(meta["metadata"], dict):
        raise SkillFormatError("metadata must be a mapping of keys to values")
    tools = meta.get("allowed-tools")
    if tools is not None and not isinstance(tools, str | list):
        raise SkillFormatError("allowed-tools must be a space-separated string or a list")


def _lenient(head: str) -> Any:
    """The frontmatter again with each top-level `key: value` whose value holds `: ` quoted —
    the one mistake hand-written skills make most (`description: Use when: ...`), which YAML
    rejects and other skill loaders accept. None when that does not make it valid."""
    lines = []
    for line in head.splitlines():
        key, sep, value = line.partition(": ")
        if sep and _KEY.match(key) and ": " in value and value.strip()[:1] not in ("'", '"', "|", ">"):
            line = f"{key}: " + json.dumps(value.strip())
        lines.append(line)
    try:
        return _load("\n".join(lines))
    except _yaml().YAMLError:
        return None


def render(meta: dict[str, Any], body: str) -> str:
    """SKILL.md text: frontmatter (known keys first, in spec order), then the body."""
    ordered = {k: meta[k] for k in KNOWN_KEYS if k in meta}
    ordered |= {k: v for k, v in meta.items() if k not in ordered}
    head = _yaml().safe_dump(ordered, sort_keys=False, allow_unicode=True, width=100)
    return f"---\n{head}---\n\n{body.strip()}\n"


def load(folder: Path, *, source: str = "user", category: str | None = None,
         writable: bool = True) -> Skill:
    """The skill in `folder`; SkillFormatError (or OSError) when it cannot be read."""
    text = (folder / "SKILL.md").read_text(encoding="utf-8")
    meta, body = parse(text, folder.name)
    return Skill(meta["name"], " ".join(meta["description"].split()), body, meta, folder,
                 source, category, writable)


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]
