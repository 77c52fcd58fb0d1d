"""Tool-call scheduling and permission decisions."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from talaria.agent.permissions import PermissionAsk, Permissions
from talaria.agent.providers.base import ToolCallRequest
from talaria.agent.tool_runner import batches, plan_call
from tests.helpers import make_session


def call(name: str, **args: object) -> ToolCallRequest:
    return ToolCallRequest(f"id_{name}_{len(args)}_{json.dumps(args, sort_keys=True)}", name, json.dumps(args))


def names(groups) -> list[list[str]]:
    return [[f"{p.name}:{p.args.get('path', p.args.get('command', ''))}" for p in g] for g in groups]


def test_batches_group_safe_calls_and_keep_order(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    planned = [plan_call(session, c) for c in [
        call("read_file", path="a"), call("read_file", path="b"),
        call("write_file", path="c", content=""), call("patch", path="d", old_string="x", new_string="y"),
        call("read_file", path="c"),          # overlaps the write of c: new batch
        call("terminal", command="ls"),        # always alone
        call("read_file", path="e"),
        call("write_file", path="e", content=""),  # overlaps the read of e: new batch
        call("search_files", pattern="x"),     # searches the whole root: overlaps the write of e
    ]]
    assert names(batches(planned)) == [
        ["read_file:a", "read_file:b", "write_file:c", "patch:d"],
        ["read_file:c"],
        ["terminal:ls"],
        ["read_file:e"],
        ["write_file:e"],
        ["search_files:"],
    ]


def test_locations_are_absolute(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    p = plan_call(session, call("read_file", path="src/../a.py"))
    assert p.paths == (session.cwd / "a.py",)


class Asker:
    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[PermissionAsk] = []

    async def __call__(self, ask: PermissionAsk) -> str:
        self.asked.append(ask)
        return self.answers.pop(0)


def check(perms: Permissions, kind: str, *paths: Path, command: str | None = None) -> str | None:
    return anyio.run(lambda: perms.check(tool_call_id="t", tool="x", kind=kind, title="x",
                                         paths=paths, command=command))


@pytest.mark.parametrize(("mode", "kind", "asks"), [
    ("default", "edit", True), ("default", "execute", True), ("default", "read", False),
    ("accept_edits", "edit", False), ("accept_edits", "execute", True),
    ("auto", "edit", False), ("auto", "execute", False), ("bypass", "edit", False),
])
def test_modes_inside_the_project(tmp_path: Path, mode: str, kind: str, asks: bool) -> None:
    asker = Asker("allow_once")
    perms = Permissions(roots=(tmp_path,), mode=mode, asker=asker, home=tmp_path / "home")
    assert check(perms, kind, tmp_path / "a.py") is None
    assert bool(asker.asked) is asks


def test_plan_mode_refuses_without_asking(tmp_path: Path) -> None:
    asker = Asker()
    perms = Permissions(roots=(tmp_path,), mode="plan", asker=asker)
    assert "Plan mode" in check(perms, "edit", tmp_path / "a.py")
    assert "Plan mode" in check(perms, "execute", command="rm -rf x")
    assert check(perms, "read", tmp_path / "a.py") is None
    assert not asker.asked


def test_outside_roots_and_sensitive_paths_ask(tmp_path: Path) -> None:
    asker = Asker("reject_once", "allow_once")
    perms = Permissions(roots=(tmp_path / "p",), mode="auto", asker=asker, home=tmp_path)
    assert check(perms, "read", Path("/etc/passwd")) == "The user rejected this tool call."
    assert "outside the project" in asker.asked[0].reason
    assert check(perms, "edit", tmp_path / "p" / ".env") is None
    assert "sensitive" in asker.asked[1].reason


def test_allow_always_is_remembered_per_kind_and_path(tmp_path: Path) -> None:
    asker = Asker("allow_always", "allow_once")
    perms = Permissions(roots=(tmp_path,), mode="default", asker=asker)
    assert check(perms, "edit", tmp_path / "a.py") is None
    assert check(perms, "edit", tmp_path / "a.py") is None
    assert len(asker.asked) == 1
    assert check(perms, "edit", tmp_path / "b.py") is None
    assert len(asker.asked) == 2


def test_rejected_edit_cannot_be_slipped_through_a_command(tmp_path: Path) -> None:
    asker = Asker("reject_always", "reject_once")
    perms = Permissions(roots=(tmp_path,), mode="auto", asker=asker, home=tmp_path / "home")
    perms.mode = "default"
    assert "rejected" in check(perms, "edit", tmp_path / "secret.py")
    perms.mode = "auto"  # even where commands never ask
    assert check(perms, "execute", command="echo hacked > secret.py") is not None
    assert "secret.py" in asker.asked[1].reason and "rejected" in asker.asked[1].reason
    assert check(perms, "edit", tmp_path / "secret.py").startswith("The user rejected edit")


def test_execute_cache_is_readable_without_asking(tmp_path: Path) -> None:
    asker = Asker()
    cache = tmp_path / "home" / "cache" / "exec"
    perms = Permissions(roots=(tmp_path / "p",), mode="default", asker=asker, read_roots=(cache,))
    assert check(perms, "read", cache / "out-1.txt") is None
    assert not asker.asked
    asker.answers.append("reject_once")
    assert check(perms, "edit", cache / "out-1.txt") is not None, "readable, not writable"
