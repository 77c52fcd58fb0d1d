"""`talaria skills ...` and the review's notice in `talaria run`, as real subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from talaria.agent.skills.curator import DAY_S, curate
from talaria.tools.skills.store import SkillStore
from tests.acp.test_client import agent_env
from tests.fakellm import FakeLLM
from tests.tools.skills.helpers import skill_md

TIMEOUT = 60


def talaria(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "talaria.acp_server", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)


def install(home: Path, name: str, description: str, body: str = "Steps.\n", **meta: str) -> Path:
    folder = home / "skills" / name
    folder.mkdir(parents=True)
    text = skill_md(name, description, body)
    if meta:
        text = text.replace("---\n\n", "metadata:\n" + "".join(f"  {k}: '{v}'\n" for k, v in meta.items())
                            + "---\n\n", 1)
    (folder / "SKILL.md").write_text(text)
    return folder


def test_list_view_pin_archive_restore_history(tmp_path: Path) -> None:
    home = tmp_path / "home"
    install(home, "release-wheel", "Build and upload a wheel")
    env = agent_env(home)
    listed = talaria(["skills", "list", "--json"], env, tmp_path)
    assert listed.returncode == 0 and json.loads(listed.stdout)[0]["name"] == "release-wheel"
    assert "Build and upload" in talaria(["skills", "view", "release-wheel"], env, tmp_path).stdout
    assert talaria(["skills", "pin", "release-wheel"], env, tmp_path).returncode == 0
    refused = talaria(["skills", "archive", "release-wheel"], env, tmp_path)
    assert refused.returncode == 2 and "pinned" in refused.stderr
    talaria(["skills", "unpin", "release-wheel"], env, tmp_path)
    history = talaria(["skills", "history", "release-wheel", "--json"], env, tmp_path)
    assert [r["action"] for r in json.loads(history.stdout)] == ["pin", "unpin"]
    assert talaria(["skills", "restore", "release-wheel", "1"], env, tmp_path).returncode == 0
    assert "pinned" in (home / "skills/release-wheel/SKILL.md").read_text()
    talaria(["skills", "unpin", "release-wheel"], env, tmp_path)
    assert talaria(["skills", "archive", "release-wheel"], env, tmp_path).returncode == 0
    assert not (home / "skills/release-wheel").exists()
    assert talaria(["skills", "restore", "release-wheel"], env, tmp_path).returncode == 0
    assert (home / "skills/release-wheel/SKILL.md").is_file()
    missing = talaria(["skills", "view", "nope"], env, tmp_path)
    assert missing.returncode == 2 and "no skill named 'nope'" in missing.stderr
    assert "name the skill" in talaria(["skills", "view"], env, tmp_path).stderr


def test_curate_archives_only_stale_agent_skills_and_reports_duplicates(tmp_path: Path) -> None:
    home = tmp_path / "home"
    old = "2020-01-01T00:00:00Z"
    install(home, "stale-agent", "An old agent skill about docker caches", created_by="agent", created_at=old)
    install(home, "stale-review", "An old review skill about npm audits", created_by="review", created_at=old)
    install(home, "stale-pinned", "A pinned one about git bisect", created_by="agent", created_at=old, pinned="true")
    install(home, "stale-user", "A user skill about kubernetes rollouts", created_at=old)
    install(home, "fresh-agent", "A new agent skill about poetry locks", created_by="agent",
            created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    install(home, "fix-flaky-pytest", "Fix flaky pytest tests by pinning seeds")
    install(home, "fix-flaky-pytests", "Pin seeds so pytest stops flaking")
    store = SkillStore(home)
    store.record("stale-review", use=True)  # used now: not stale
    report = curate(store, 30, dry_run=True)
    assert report.archived == ["stale-agent"]
    assert report.duplicates == [["fix-flaky-pytest", "fix-flaky-pytests"]]
    assert store.get("stale-agent") is not None  # a dry run changes nothing
    assert curate(store, 30, now=time.time() + 40 * DAY_S).archived == \
        ["fresh-agent", "stale-agent", "stale-review"]
    assert {p.name for p in store.archived()} == {"fresh-agent", "stale-agent", "stale-review"}
    out = talaria(["skills", "curate", "--json"], agent_env(home), tmp_path)
    assert json.loads(out.stdout)["duplicates"] == [["fix-flaky-pytest", "fix-flaky-pytests"]]


def test_talaria_run_prints_what_the_review_saved(tmp_path: Path, fake_llm: FakeLLM) -> None:
    project = tmp_path / "project"
    project.mkdir()
    todo = {"name": "todo", "arguments": {"todos": [{"id": "1", "content": "x"}]}}
    create = {"name": "memory", "arguments": {"action": "add", "target": "user",
                                              "content": "Prefers pytest -x."}}
    fake_llm.script([{"tool_calls": [todo]}, {"text": "Done."}, {"tool_calls": [create]},
                     {"text": "Saved."}])
    env = agent_env(tmp_path / "home", fake_llm, TALARIA_SKILL_REVIEW_INTERVAL="1")
    result = talaria(["run", "--yes", "do it"], env, project)
    assert result.returncode == 0, result.stderr
    assert result.stdout.index("Done.") < result.stdout.index("! Updated user profile")
    assert (tmp_path / "home/memories/USER.md").read_text() == "Prefers pytest -x.\n"


def test_messages_name_the_cli_not_the_models_tools(tmp_path: Path) -> None:
    """Issue 28: "skills_list shows them" is the model's tool, not the user's command."""
    home = tmp_path / "home"
    install(home, "release-wheel", "Build and upload a wheel")
    env = agent_env(home)
    for args in (["skills", "view", "nope"], ["skills", "pin", "nope"], ["skills", "history", "nope"]):
        done = talaria(args, env, tmp_path)
        assert done.returncode == 2, done.stderr
        assert "no skill named 'nope' (skills: release-wheel)" in done.stderr
        assert "skills_list" not in done.stderr and "skill_view" not in done.stderr
