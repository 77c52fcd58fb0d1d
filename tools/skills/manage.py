"""`skill_manage` actions: create, patch, edit, delete, write_file, remove_file.

Guards, each a refusal the model can act on (never a silent change): patch/edit of a skill
this session has not viewed at its current version ("view it first" — the review used to
patch skills it had never read); create of a near-duplicate (names the skill to patch); text
with credentials or injection; SKILL.md over `SKILL_MD_MAX` or a file over `SUPPORT_FILE_MAX`;
paths outside the four supporting folders; delete of a pinned skill; writes to project skills
unless the user allowed them. Provenance goes into frontmatter `metadata` (and, for skills
learned from a run, which run and task into `provenance.json`: sets.py).
"""

from __future__ import annotations

import time
from pathlib import Path, PurePosixPath
from typing import Any

from talaria.tools.skills.format import (
    SKILL_MD_MAX,
    SUPPORT_DIRS,
    SUPPORT_FILE_MAX,
    Skill,
    SkillFormatError,
    check_name,
    parse,
    render,
)
from talaria.tools.skills.guards import content_problem, near_duplicate
from talaria.tools.skills.sets import note_provenance
from talaria.tools.skills.state import SkillsState
from talaria.tools.skills.store import HISTORY, SkillError, versions

PROTECTED = ("created_by", "created_session", "created_at", "pinned")
ACTIONS = ("create", "patch", "edit", "delete", "write_file", "remove_file")


def manage(state: SkillsState, args: dict[str, Any], session_id: str) -> dict[str, Any]:
    action = args.get("action")
    if action not in ACTIONS:
        return {"error": f"action must be one of {', '.join(ACTIONS)}, got {action!r}"}
    try:
        name = check_name(args.get("name"))
        return _ACTIONS[action](state, name, args, session_id)
    except (SkillError, SkillFormatError) as exc:
        return {"error": str(exc)}


def _create(state: SkillsState, name: str, args: dict[str, Any], session_id: str) -> dict[str, Any]:
    store = state.store
    content = _text(args, "content")
    _size(content, SKILL_MD_MAX, "SKILL.md")
    meta, body = parse(content, name)
    _guard(content)
    existing = store.scan()
    if name in existing:
        raise SkillError(f"skill {name!r} exists ({existing[name].path}); skill_view it, then "
                         "patch or edit it")
    if (dup := near_duplicate(name, f"{meta['description']}\n{body}", existing.values())) is not None:
        skill, how = dup
        raise SkillError(f"refused: {name!r} nearly duplicates skill {skill.name!r} ({how}). "
                         f"skill_view {skill.name!r} and patch it instead of creating a new skill.")
    category = args.get("category")
    if category is not None:
        category = check_name(category)
    folder = store.new_folder(name, category)
    now = _now()
    fresh = {k: v for k, v in _meta(meta).items() if k not in PROTECTED}
    meta["metadata"] = {**fresh, "created_by": state.actor, "created_session": session_id,
                        "created_at": now, "updated_by": state.actor, "updated_at": now}
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(render(meta, body), encoding="utf-8")
    _learned(state, folder, "create")
    version = store.commit(folder, by=state.actor, action="create", session=session_id)
    state.viewed[name] = version
    state.changed(f"Saved skill `{name}`")
    return {"success": True, "name": name, "path": str(folder), "version": version}


def _patch(state: SkillsState, name: str, args: dict[str, Any], session_id: str) -> dict[str, Any]:
    skill = _writable(state, name, viewed=True)
    target, relative = _file(skill, args.get("file_path"), default="SKILL.md")
    old, new = args.get("old_string"), args.get("new_string")
    if not isinstance(old, str) or not old or not isinstance(new, str):
        raise SkillError("patch needs old_string (text that is in the file) and new_string")
    text = target.read_text(encoding="utf-8")
    count = text.count(old)
    if count == 0:
        raise SkillError(f"old_string is not in {relative}; skill_view it and copy the exact text")
    if count > 1 and not args.get("replace_all"):
        raise SkillError(f"old_string occurs {count} times in {relative}; give more context "
                         "or set replace_all")
    updated = text.replace(old, new) if args.get("replace_all") else text.replace(old, new, 1)
    return _save(state, skill, relative, updated, "patch", session_id)


def _edit(state: SkillsState, name: str, args: dict[str, Any], session_id: str) -> dict[str, Any]:
    skill = _writable(state, name, viewed=True)
    return _save(state, skill, "SKILL.md", _text(args, "content"), "edit", session_id)


def _write_file(state: SkillsState, name: str, args: dict[str, Any], session_id: str) -> dict[str, Any]:
    skill = _writable(state, name, viewed=False)
    _target, relative = _file(skill, args.get("file_path"), default=None)
    return _save(state, skill, relative, _text(args, "file_content"), "write_file", session_id)


def _remove_file(state: SkillsState, name: str, args: dict[str, Any], session_id: str) -> dict[str, Any]:
    skill = _writable(state, name, viewed=False)
    target, relative = _file(skill, args.get("file_path"), default=None)
    if not target.is_file():
        raise SkillError(f"{name} has no file {relative}")
    target.unlink()
    _stamp(state, skill, session_id)
    _learned(state, skill.path, f"remove_file {relative}")
    version = state.store.commit(skill.path, by=state.actor, action=f"remove_file {relative}",
                                 session=session_id)
    state.viewed[name] = version
    state.changed(f"Updated skill `{name}`")
    return {"success": True, "name": name, "removed": relative, "version": version}


def _delete(state: SkillsState, name: str, args: dict[str, Any], session_id: str) -> dict[str, Any]:
    skill = _writable(state, name, viewed=False)
    if skill.pinned:
        raise SkillError(f"skill {name!r} is pinned and cannot be deleted (the user pinned it: "
                         "`talaria skills unpin` first)")
    absorbed = args.get("absorbed_into")
    if absorbed is not None:
        if absorbed == name:
            raise SkillError("absorbed_into must name another skill")
        state.store.require(check_name(absorbed))
    _stamp(state, skill, session_id, deleted=True, absorbed_into=absorbed)
    state.store.commit(skill.path, by=state.actor, action="delete", session=session_id)
    target = state.store.archive(skill)
    state.viewed.pop(name, None)
    state.changed(f"Archived skill `{name}`" + (f" (merged into `{absorbed}`)" if absorbed else ""))
    return {"success": True, "name": name, "archived_to": str(target),
            "note": "kept in the archive with its history: `talaria skills restore` brings it back"}


def _save(state: SkillsState, skill: Skill, relative: str, text: str, action: str,
          session_id: str) -> dict[str, Any]:
    """Write one file of a skill (checked first), stamp provenance, keep the version."""
    if relative == "SKILL.md":
        _size(text, SKILL_MD_MAX, "SKILL.md")
        meta, body = parse(text, skill.path.name)
        _guard(text)
        # Provenance and pins are the store's, not the writer's: an edit cannot forge them.
        kept = {k: v for k, v in skill.metadata.items() if k in PROTECTED}
        fresh = {k: v for k, v in _meta(meta).items() if k not in PROTECTED}
        meta["metadata"] = {**fresh, **kept, **_updated(state, session_id)}
        (skill.path / "SKILL.md").write_text(render(meta, body), encoding="utf-8")
    else:
        _size(text, SUPPORT_FILE_MAX, relative)
        _guard(text)
        target = skill.path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        _stamp(state, skill, session_id)
    _learned(state, skill.path, f"{action} {relative}")
    version = state.store.commit(skill.path, by=state.actor, action=f"{action} {relative}",
                                 session=session_id)
    state.viewed[skill.name] = version
    state.changed(f"Updated skill `{skill.name}`")
    return {"success": True, "name": skill.name, "file": relative, "version": version}


def _stamp(state: SkillsState, skill: Skill, session_id: str, **extra: Any) -> None:
    """Record who changed the skill (and `extra`) in its frontmatter metadata."""
    path = skill.path / "SKILL.md"
    meta, body = parse(path.read_text(encoding="utf-8"), skill.path.name)
    meta["metadata"] = {**_meta(meta), **_updated(state, session_id),
                        **{k: str(v) for k, v in extra.items() if v is not None}}
    path.write_text(render(meta, body), encoding="utf-8")


def _learned(state: SkillsState, folder: Path, action: str) -> None:
    """A write of `talaria skills learn`: which run and task it came from, in the skill."""
    if state.provenance is not None:
        note_provenance(folder, state.provenance, action)


def _writable(state: SkillsState, name: str, *, viewed: bool) -> Skill:
    skill = state.store.require(name)
    if not skill.writable:
        raise SkillError(f"skill {name!r} is a project skill ({skill.path}) and read-only to the "
                         "agent; the user can allow writes with project_skill_writes = true")
    current = max(versions(skill.path), default=0)
    if viewed and state.viewed.get(name) != current:
        seen = state.viewed.get(name)
        why = "not viewed in this session" if seen is None else "changed since you viewed it"
        raise SkillError(f"refused: skill {name!r} was {why}. View it first: "
                         f"skill_view(name={name!r}), then patch with text copied from it.")
    return skill


def _file(skill: Skill, value: Any, *, default: str | None) -> tuple[Path, str]:
    """(absolute path, relative path) of a skill file; only SKILL.md or the four folders."""
    if value in (None, "") and default is not None:
        return skill.path / default, default
    if not isinstance(value, str) or not value:
        raise SkillError(f"file_path is needed, under one of {', '.join(SUPPORT_DIRS)}/")
    relative = PurePosixPath(value.replace("\\", "/"))
    if relative.as_posix() == "SKILL.md" and default is not None:
        return skill.path / "SKILL.md", "SKILL.md"
    parts = relative.parts
    if (relative.is_absolute() or ".." in parts or len(parts) < 2 or parts[0] not in SUPPORT_DIRS
            or any(p.startswith(".") for p in parts) or HISTORY in parts):
        raise SkillError(f"file_path {value!r} must be a relative path under one of "
                         f"{', '.join(d + '/' for d in SUPPORT_DIRS)} (e.g. references/api.md)")
    target = (skill.path / relative).resolve()
    if skill.path.resolve() not in target.parents:  # a symlinked folder pointing outside
        raise SkillError(f"file_path {value!r} leaves the skill folder")
    return skill.path / relative, relative.as_posix()


def _guard(text: str) -> None:
    if (problem := content_problem(text)) is not None:
        raise SkillError(problem)


def _size(text: str, limit: int, what: str) -> None:
    if len(text) > limit:
        raise SkillError(f"{what} has {len(text):,} characters; at most {limit:,}. Keep SKILL.md "
                         "focused and move detail into references/ files")


def _text(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        raise SkillError(f"{key} is needed (the full text)")
    return value


def _meta(meta: dict[str, Any]) -> dict[str, Any]:
    value = meta.get("metadata")
    return dict(value) if isinstance(value, dict) else {}


def _updated(state: SkillsState, session_id: str) -> dict[str, str]:
    return {"updated_by": state.actor, "updated_session": session_id, "updated_at": _now()}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


_ACTIONS = {"create": _create, "patch": _patch, "edit": _edit, "delete": _delete,
            "write_file": _write_file, "remove_file": _remove_file}
