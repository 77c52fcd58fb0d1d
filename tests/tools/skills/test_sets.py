"""Skill sets on disk: a store over a set is the whole library (no user or project skill),
names are checked, writes of a learning session record their run and task in the skill."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from talaria.tools.skills.manage import manage
from talaria.tools.skills.sets import (
    NONE,
    check_set_name,
    contents,
    provenance,
    require_set,
    set_path,
)
from talaria.tools.skills.state import SkillsState
from talaria.tools.skills.store import HISTORY, SkillError, SkillStore
from tests.tools.skills.helpers import skill_md


def put(root: Path, name: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "SKILL.md").write_text(skill_md(name, f"Use for {name} work"))


def test_a_store_over_a_set_sees_only_the_set(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    put(home / "skills", "mine")
    put(project / ".talaria" / "skills", "theirs")
    folder = set_path(home, "learned")
    put(folder, "from-a-run")
    store = SkillStore(home, project, root=folder)
    assert sorted(store.scan()) == ["from-a-run"]
    assert store.user_root == folder and store.roots() == [(folder, "user")]
    assert sorted(SkillStore(home, project).scan()) == ["mine", "theirs"]  # unchanged without


@pytest.mark.parametrize("name", [NONE, "", "../up", "a/b", ".hidden", "x" * 65])
def test_bad_set_names_are_refused(name: str) -> None:
    with pytest.raises(SkillError):
        check_set_name(name)


def test_an_unknown_set_names_the_sets_there_are(tmp_path: Path) -> None:
    set_path(tmp_path, "alpha").mkdir(parents=True)
    with pytest.raises(SkillError, match=r"no skill set 'beta' .*\(sets: alpha\); make one with "
                                         r"`talaria skills learn RUN --into beta`"):
        require_set(tmp_path, "beta")
    assert require_set(tmp_path, "alpha") == set_path(tmp_path, "alpha")


def test_writes_of_a_learning_session_keep_their_run_and_task(tmp_path: Path) -> None:
    folder = set_path(tmp_path, "learned")
    state = SkillsState(SkillStore(tmp_path, root=folder), actor="review",
                        provenance={"run": "/runs/r1", "task": "t1", "attempt": 2})
    content = skill_md("fix-port", "Use when a service listens on the wrong port")
    assert manage(state, {"action": "create", "name": "fix-port", "content": content}, "s1")["success"]
    assert manage(state, {"action": "patch", "name": "fix-port", "old_string": "Do it.",
                          "new_string": "Do it, then check."}, "s1")["success"]
    entries = provenance(folder / "fix-port")
    assert [(e["run"], e["task"], e["attempt"], e["action"]) for e in entries] == [
        ("/runs/r1", "t1", 2, "create"), ("/runs/r1", "t1", 2, "patch SKILL.md")]
    # Every version carries the provenance it had: the first one names the create only.
    first = json.loads((folder / "fix-port" / HISTORY / "0001" / "provenance.json").read_text())
    assert [e["action"] for e in first] == ["create"]
    assert contents(folder) == {"fix-port": 2}
    # A live session (no provenance) writes none.
    live = SkillsState(SkillStore(tmp_path), actor="agent")
    assert manage(live, {"action": "create", "name": "other", "content": skill_md(
        "other", "Use when releasing a wheel")}, "s2")["success"]
    assert provenance(tmp_path / "skills" / "other") == []
