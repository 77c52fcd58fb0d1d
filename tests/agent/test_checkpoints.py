"""Checkpoints and undo at the agent level: real git, real files, the fake LLM.

A checkpoint is taken before a turn's first change (a shadow repository under
$TALARIA_HOME/checkpoints/, the project's own .git untouched); `/undo` puts the last turn's
files back, `/restore N` the project as at N; restores are checkpoints too. Bounds
(FILE_LIMIT, MAX_FILES, MAX_CHECKPOINTS) are hit with small values.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from talaria.agent import commands
from talaria.agent.checkpoints import checkpoints_dir, journal, shadow, turns
from talaria.agent.loop import run_turn
from talaria.agent.session import Session
from tests.helpers import make_session, recorded


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def turn(session: Session, llm: Any, *calls: dict[str, object], prompt: str = "change") -> str:
    llm.script([{"tool_calls": list(calls)}, {"text": "Done."}] if calls else [{"text": "Hi."}])
    return anyio.run(run_turn, session, prompt)


def command(session: Session, name: str, arg: str = "") -> str:
    return anyio.run(commands._dispatch, session, None, name, arg)


def files(project: Path) -> dict[str, bytes]:
    return {str(p.relative_to(project)): p.read_bytes() for p in sorted(project.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(project).parts}


def git(project: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=project, capture_output=True, text=True,
                          check=True).stdout


@pytest.fixture
def session(tmp_path: Path, fake_llm) -> Session:
    s = make_session(fake_llm, tmp_path)
    (s.cwd / "a.txt").write_text("original a\n")
    (s.cwd / "gone.txt").write_text("to be deleted\n")
    return s


def test_undo_restores_modified_created_and_deleted_files(session: Session, fake_llm) -> None:
    project = session.cwd
    before = files(project)
    assert turn(session, fake_llm, call("write_file", path="a.txt", content="changed\n"),
                call("write_file", path="sub/new.txt", content="new\n"),
                call("terminal", command="rm gone.txt")) == "end_turn"
    assert files(project) != before
    listing = command(session, "checkpoints")
    assert "1. " in listing and "change" in listing and "3 file(s): a.txt, gone.txt, sub/new.txt" in listing
    reply = command(session, "undo")
    assert files(project) == before
    assert "a.txt (modified since → restored)" in reply
    assert "gone.txt (deleted since → recreated)" in reply
    assert "sub/new.txt (created since → deleted)" in reply
    assert "This restore is checkpoint 2: /restore 2 takes it back." in reply
    command(session, "restore", "2")  # undo of the undo
    assert files(project)["a.txt"] == b"changed\n" and "gone.txt" not in files(project)


def test_undo_goes_back_one_turn_at_a_time(session: Session, fake_llm) -> None:
    project = session.cwd
    turn(session, fake_llm, call("write_file", path="a.txt", content="one\n"), prompt="first")
    turn(session, fake_llm, call("write_file", path="a.txt", content="two\n"), prompt="second")
    assert "before the turn \"second\"" in command(session, "undo")
    assert (project / "a.txt").read_text() == "one\n"
    assert "before the turn \"first\"" in command(session, "undo")
    assert (project / "a.txt").read_text() == "original a\n"
    with pytest.raises(commands.CommandError, match="nothing to undo"):
        command(session, "undo")
    listing = command(session, "checkpoints")
    assert "2. " in listing and "turn (undone): second" in listing


def test_the_projects_own_git_is_never_touched(session: Session, fake_llm, tmp_path: Path) -> None:
    project = session.cwd
    git(project, "init", "-q")
    git(project, "-c", "user.name=u", "-c", "user.email=u@x", "add", "-A")
    git(project, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "mine")
    status, head = git(project, "status", "--porcelain"), git(project, "rev-parse", "HEAD")

    def state() -> dict[Path, tuple[int, bytes]]:  # git status itself may rewrite the index
        return {p: (p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else b"")
                for p in (project / ".git").rglob("*")}

    snapshot = state()
    turn(session, fake_llm, call("write_file", path="a.txt", content="changed\n"))
    command(session, "undo")
    assert state() == snapshot
    assert git(project, "status", "--porcelain") == status and git(project, "rev-parse", "HEAD") == head
    home = tmp_path / ".home"
    shadow_dir = checkpoints_dir(home, project)
    assert (shadow_dir / "git" / "HEAD").exists() and (shadow_dir / "journal.json").exists()


def test_a_turn_that_changes_nothing_leaves_no_checkpoint(session: Session, fake_llm) -> None:
    turn(session, fake_llm, call("read_file", path="a.txt"))  # reads take no snapshot at all
    turn(session, fake_llm, call("terminal", command="ls"))  # a command that changed nothing
    assert command(session, "checkpoints").startswith("No checkpoints yet")
    with pytest.raises(commands.CommandError, match="nothing to undo"):
        command(session, "undo")


def test_binary_files_and_modes_come_back_exactly(session: Session, fake_llm) -> None:
    project = session.cwd
    blob = bytes(range(256)) * 10
    (project / "img.bin").write_bytes(blob)
    (project / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (project / "run.sh").chmod(0o755)
    turn(session, fake_llm, call("terminal", command="rm img.bin run.sh; echo x > a.txt"))
    command(session, "undo")
    assert (project / "img.bin").read_bytes() == blob
    assert os.access(project / "run.sh", os.X_OK)


def test_files_over_the_size_cap_are_left_out_with_a_note(session: Session, fake_llm,
                                                          monkeypatch) -> None:
    monkeypatch.setattr(shadow, "FILE_LIMIT", 1000)
    monkeypatch.setattr(turns, "FILE_LIMIT", 1000)
    project = session.cwd
    (project / "big.dat").write_bytes(b"x" * 1001)
    (project / "small.dat").write_bytes(b"x" * 1000)  # at the cap: kept
    turn(session, fake_llm, call("terminal", command="rm big.dat small.dat"))
    (note,) = [e.text for e in recorded(session).of("Notice") if "Not in the checkpoint" in e.text]
    assert "big.dat (larger than" in note and "small.dat" not in note
    assert "not checkpointed: big.dat" in command(session, "checkpoints")
    reply = command(session, "undo")
    assert (project / "small.dat").exists() and not (project / "big.dat").exists()
    assert "Not restored (never checkpointed): big.dat" in reply


def test_a_project_with_too_many_files_is_not_checkpointed(session: Session, fake_llm,
                                                           monkeypatch) -> None:
    monkeypatch.setattr(shadow, "MAX_FILES", 3)
    for i in range(2):
        (session.cwd / f"f{i}.txt").write_text("x")  # 4 files: over the bound
    turn(session, fake_llm, call("write_file", path="a.txt", content="changed\n"))
    turn(session, fake_llm, call("write_file", path="a.txt", content="again\n"))
    notes = [e.text for e in recorded(session).of("Notice") if "No checkpoint" in e.text]
    assert len(notes) == 1 and "more than 3 files" in notes[0]  # said once, not each turn
    assert (session.cwd / "a.txt").read_text() == "again\n"
    with pytest.raises(commands.CommandError, match="nothing to undo"):
        command(session, "undo")


def test_dependency_folders_and_the_home_inside_the_project_are_left_out(tmp_path: Path, fake_llm,
                                                                        monkeypatch) -> None:
    project = tmp_path / "project"
    project.mkdir()
    home = project / ".talaria"
    monkeypatch.setenv("TALARIA_HOME", str(home))
    session = make_session(fake_llm, tmp_path)
    session.checkpoints = turns.TurnCheckpoints(home, project, session.id)
    (project / "node_modules" / "pkg").mkdir(parents=True)
    (project / "node_modules" / "pkg" / "index.js").write_text("x")
    turn(session, fake_llm, call("write_file", path="a.txt", content="x\n"))
    repo = shadow.ShadowRepo(home, project)
    tracked = repo.git("ls-files").decode().split()
    assert tracked == ["a.txt"]


def test_only_the_newest_checkpoints_are_kept(session: Session, fake_llm, monkeypatch) -> None:
    monkeypatch.setattr(journal, "MAX_CHECKPOINTS", 3)
    for i in range(5):
        turn(session, fake_llm, call("write_file", path="a.txt", content=f"{i}\n"), prompt=f"t{i}")
    listing = command(session, "checkpoints")
    assert [line.split(".")[0] for line in listing.splitlines() if line[:1].isdigit()] == ["5", "4", "3"]
    with pytest.raises(commands.CommandError, match="no checkpoint 1 for this project"):
        command(session, "restore", "1")


def test_bad_restores_change_nothing(session: Session, fake_llm) -> None:
    turn(session, fake_llm, call("write_file", path="a.txt", content="changed\n"))
    before = files(session.cwd)
    repo_head = shadow.ShadowRepo(session.checkpoints.repo.home, session.cwd).head()  # type: ignore[union-attr]
    for arg, error in (("7", "no checkpoint 7"), ("", "needs a checkpoint number"),
                       ("two", "needs a checkpoint number")):
        with pytest.raises(commands.CommandError, match=error):
            command(session, "restore", arg)
    assert files(session.cwd) == before
    assert session.checkpoints.repo.head() == repo_head  # type: ignore[union-attr]


def test_restoring_to_where_the_files_already_are_says_so(session: Session, fake_llm) -> None:
    turn(session, fake_llm, call("write_file", path="a.txt", content="changed\n"))
    command(session, "undo")
    assert command(session, "restore", "1").startswith("Nothing to restore")


def test_parallel_edits_of_one_turn_share_one_checkpoint(session: Session, fake_llm) -> None:
    turn(session, fake_llm, *[call("write_file", path=f"p{i}.txt", content="x") for i in range(4)])
    listing = command(session, "checkpoints")
    assert listing.count(", turn") == 1 and "4 file(s)" in listing


def test_checkpoints_can_be_turned_off(tmp_path: Path, fake_llm) -> None:
    session = make_session(fake_llm, tmp_path, checkpoints=False)
    assert session.checkpoints is None
    turn(session, fake_llm, call("write_file", path="a.txt", content="x"))
    assert not (tmp_path / ".home" / "checkpoints").exists()
    with pytest.raises(commands.CommandError, match="checkpoints are off"):
        command(session, "undo")


def test_undo_of_a_turn_already_reverted_by_hand_moves_on(session: Session, fake_llm) -> None:
    turn(session, fake_llm, call("write_file", path="a.txt", content="one\n"), prompt="first")
    turn(session, fake_llm, call("write_file", path="a.txt", content="two\n"), prompt="second")
    (session.cwd / "a.txt").write_text("one\n")  # the user put it back themselves
    assert command(session, "undo").startswith("Nothing to restore")
    assert "before the turn \"first\"" in command(session, "undo")  # not stuck on "second"
    assert (session.cwd / "a.txt").read_text() == "original a\n"


def test_a_nested_git_repository_is_left_out_with_a_note(session: Session, fake_llm) -> None:
    """git would keep only a nested repository's commit (a gitlink), never its files: it is
    named as left out, and undo restores the rest without tripping over it."""
    project = session.cwd
    nested = project / "vendor" / "lib"
    nested.mkdir(parents=True)
    (nested / "lib.txt").write_text("lib 1\n")
    git(nested, "init", "-q")
    git(nested, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", "x")
    turn(session, fake_llm, call("terminal", command="echo lib 2 > vendor/lib/lib.txt; echo b > a.txt"))
    (note,) = [e.text for e in recorded(session).of("Notice") if "Not in the checkpoint" in e.text]
    assert "vendor/lib/ (a git repository of its own)" in note
    reply = command(session, "undo")
    assert reply.startswith("Restored 1 file(s)") and "a.txt (modified since → restored)" in reply
    assert "Not restored (never checkpointed): vendor/lib/" in reply
    assert (project / "a.txt").read_text() == "original a\n"
    assert (nested / "lib.txt").read_text() == "lib 2\n"  # not ours: left as it is
    assert git(nested, "status", "--porcelain") == "?? lib.txt\n"


def test_symlinks_and_a_file_turned_into_a_folder_come_back(session: Session, fake_llm) -> None:
    project = session.cwd
    (project / "link").symlink_to("a.txt")
    (project / "other").symlink_to("gone.txt")
    (project / "spot").write_text("a file\n")
    before = {p.name: (p.is_symlink(), os.readlink(p) if p.is_symlink() else p.read_bytes())
              for p in project.iterdir() if p.name != ".home"}
    turn(session, fake_llm, call("terminal", command=(
        "rm link; ln -sfn a.txt other; rm spot; mkdir spot; echo inside > spot/f.txt")))
    assert (project / "spot").is_dir() and os.readlink(project / "other") == "a.txt"
    reply = command(session, "undo")
    after = {p.name: (p.is_symlink(), os.readlink(p) if p.is_symlink() else p.read_bytes())
             for p in project.iterdir() if p.name != ".home"}
    assert after == before, reply
    command(session, "restore", "2")  # the undo, taken back: the turn's state again
    assert (project / "spot" / "f.txt").read_text() == "inside\n"
    assert os.readlink(project / "other") == "a.txt" and not (project / "link").is_symlink()


def test_a_file_that_cannot_be_put_back_is_named_and_the_rest_restored(session: Session,
                                                                        fake_llm) -> None:
    project = session.cwd
    (project / ".gitignore").write_text("*.log\n")  # the project's own ignores hold
    turn(session, fake_llm, call("terminal", command="echo b > a.txt; rm gone.txt; mkdir gone.txt; "
                                                     "touch gone.txt/run.log"))
    reply = command(session, "undo")  # gone.txt is now a folder holding an untracked file
    assert (project / "a.txt").read_text() == "original a\n"
    assert "Could not restore: gone.txt" in reply and "Restored 1 file(s)" in reply


def test_snapshots_pack_their_files_and_packs_are_merged_past_the_bound(session: Session, fake_llm,
                                                                        monkeypatch) -> None:
    monkeypatch.setattr(shadow, "MAX_PACKS", 3)
    for i in range(4):
        turn(session, fake_llm, call("write_file", path="a.txt", content=f"{i}\n"), prompt=f"t{i}")
    repo = session.checkpoints.repo  # type: ignore[union-attr]
    objects = repo.git_dir / "objects"
    loose = [d.name + f.name for d in objects.iterdir() if len(d.name) == 2 for f in d.iterdir()]
    kinds = {repo.git("cat-file", "-t", sha).decode().strip() for sha in loose}
    assert "blob" not in kinds  # files go into packs (trees and commits may stay loose)
    assert 1 <= len(list((objects / "pack").glob("*.pack"))) <= 3
    for _ in range(4):
        command(session, "undo")
    assert (session.cwd / "a.txt").read_text() == "original a\n"


def test_restore_and_undo_are_the_users_never_the_models(session: Session, fake_llm) -> None:
    """/undo and /restore are slash commands the user types: no tool reaches them (the tools
    layer never imports the agent's, see tests/test_architecture.py), and neither a tool call
    by their names nor the model's text saying them restores anything, whatever the mode."""
    turn(session, fake_llm, call("write_file", path="a.txt", content="changed\n"))
    for mode in ("bypass", "plan"):
        session.permissions.mode = mode
        fake_llm.script([{"tool_calls": [call("undo"), call("restore", n=1), call("checkpoints")]},
                         {"text": "/undo"}, {"text": "/restore 1"}])
        anyio.run(run_turn, session, "undo it")
        anyio.run(run_turn, session, "/restore 1 please")  # a prompt's text is no command here
    assert (session.cwd / "a.txt").read_text() == "changed\n"
    assert [c.kind for c in session.checkpoints.journal.load()] == ["turn"]  # type: ignore[union-attr]
    unknown = [m for m in session.messages if m["role"] == "tool"][-3:]
    assert all("Unknown tool" in m["content"] for m in unknown)
    assert not {"undo", "restore", "checkpoints"} & {t.name for t in session.current_tools()}
