"""Headless (`talaria run`, the local workspace): what auto mode's unseen commands and scripts
can do after the user rejected an edit, on every sandbox tier this machine has, for real.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from talaria.agent.permissions import NO_SANDBOX, PermissionAsk
from talaria.agent.session import Session
from talaria.agent.tool_runner import call_nested
from talaria.tools.sandbox import tiers
from talaria.tools.terminal import SANDBOX_NOTE
from tests.exec_helpers import configure
from tests.helpers import make_session

CONFINED = [t for t in ("bubblewrap", "landlock")
            if (t == "bubblewrap" and tiers._bwrap_works()) or (t == "landlock" and tiers.landlock_abi() >= 1)]
ENV = "API_TOKEN=talaria-test-token\n"


class Asker:
    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[PermissionAsk] = []

    async def __call__(self, ask: PermissionAsk) -> str:
        self.asked.append(ask)
        return self.answer


def call(session: Session, name: str, **args: Any) -> dict[str, Any]:
    return anyio.run(call_nested, session, name, args)


@pytest.fixture
def rejected(fake_llm, tmp_path: Path, request: pytest.FixtureRequest) -> Session:
    """A session whose user rejected an edit of `.env`, now in auto mode on `tier`."""
    session = make_session(fake_llm, tmp_path, mode="default")
    project = session.cwd
    (project / ".env").write_text(ENV)
    (project / "notes.txt").write_text("notes\n")
    asker = Asker("reject_once")
    session.permissions.asker = asker
    assert call(session, "write_file", path=".env", content="X")["rejected"]
    session.permissions.mode = "auto"
    session.permissions.sandbox_tier = request.param
    configure(session, tier=request.param)
    asker.answer = "allow_once"  # whatever asks from now on would go through: nothing may
    yield session
    session.close()


WALKAROUNDS = [
    "f=.en; echo X > ${f}v",
    "python3 -c \"open('.e'+'nv','w').write('X')\"",
    "f=.en; cp notes.txt ${f}v",
    "f=.en; ln -sf notes.txt ${f}v",
    "f=.en; mv notes.txt ${f}v",
    "f=.en; rm ${f}v && echo X > ${f}v",
    "f=.en; sed -i s/talaria/X/ ${f}v",
]


@pytest.mark.parametrize("rejected", CONFINED, indirect=True)
def test_unseen_commands_and_scripts_cannot_change_a_rejected_path(rejected: Session) -> None:
    env = rejected.cwd / ".env"
    for command in WALKAROUNDS:
        result = call(rejected, "terminal", command=command)
        assert env.read_text() == ENV and not env.is_symlink(), (command, result)
        assert result["exit_code"] != 0 and result["sandbox"].startswith(SANDBOX_NOTE), result
    result = call(rejected, "execute_code", code="open('.e'+'nv', 'w').write('X')")
    assert "error" in result and env.read_text() == ENV, result
    assert call(rejected, "terminal", command="echo more >> notes.txt")["exit_code"] == 0
    assert (rejected.cwd / "notes.txt").read_text() == "notes\nmore\n"
    assert len(rejected.permissions.asker.asked) == 1, "none of them asked"  # type: ignore[attr-defined]


@pytest.mark.parametrize("rejected", CONFINED, indirect=True)
def test_unseen_background_processes_are_confined_the_same(rejected: Session) -> None:
    env = rejected.cwd / ".env"

    async def start_and_wait() -> tuple[dict[str, Any], dict[str, Any]]:  # one event loop
        started = await call_nested(rejected, "terminal", {
            "background": True,
            "command": "f=.en; echo X > ${f}v; echo status=$?; echo more >> notes.txt"})
        return started, await call_nested(rejected, "process", {
            "action": "wait", "session_id": started["session_id"], "timeout": 30})

    started, done = anyio.run(start_and_wait)
    assert started["status"] == "running" and started["sandbox"].startswith(SANDBOX_NOTE), started
    assert "status=1" in done["output"] or "status=2" in done["output"], done
    assert env.read_text() == ENV
    assert (rejected.cwd / "notes.txt").read_text() == "notes\nmore\n"
    assert len(rejected.permissions.asker.asked) == 1, "it did not ask"  # type: ignore[attr-defined]


@pytest.mark.parametrize("rejected", CONFINED, indirect=True)
def test_unseen_commands_write_nothing_outside_the_project(rejected: Session, tmp_path: Path) -> None:
    outside = Path("/var/tmp") / f"talaria-outside-{tmp_path.name}"
    beside = tmp_path / "beside.txt"
    try:
        result = call(rejected, "terminal", command=f"echo X > {outside}; echo X > {beside}; "
                                                      "echo X > ~/.talaria-outside-test")
        assert not outside.exists() and not beside.exists(), result
        assert not (Path.home() / ".talaria-outside-test").exists()
        assert "No network" in result["sandbox"]
    finally:
        outside.unlink(missing_ok=True)
        (Path.home() / ".talaria-outside-test").unlink(missing_ok=True)


@pytest.mark.parametrize("rejected", ["rlimits"], indirect=True)
def test_without_a_sandbox_tier_unseen_commands_ask(rejected: Session) -> None:
    asker = rejected.permissions.asker
    asker.answer = "reject_once"  # type: ignore[attr-defined]
    result = call(rejected, "terminal", command="f=.en; echo X > ${f}v")
    assert result["rejected"] and asker.asked[-1].reason == NO_SANDBOX  # type: ignore[attr-defined]
    assert (rejected.cwd / ".env").read_text() == ENV


@pytest.mark.parametrize("tier", CONFINED)
def test_auto_mode_hides_credential_stores_from_commands(fake_llm, tmp_path: Path, tier: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The project at $HOME: `~/.ssh` is inside the writable project, and still hidden."""
    home = tmp_path / "project"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("talaria-test-key\n")
    monkeypatch.setenv("HOME", str(home))
    session = make_session(fake_llm, tmp_path, mode="auto")
    session.permissions.sandbox_tier = tier
    try:
        result = call(session, "terminal", command="cat ~/.ssh/id_rsa; cat .ssh/id_rsa; ls -a ~/.ssh")
        assert "talaria-test-key" not in json.dumps(result), result
    finally:
        session.close()
