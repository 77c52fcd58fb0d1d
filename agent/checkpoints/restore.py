"""Putting files back: `/undo` (the last turn's files) and `/restore N` (the project as at N).

    await undo(repo, journal, session_id, workspace)            -> reply text
    await restore(repo, journal, number, workspace, session_id) -> reply text

Replies name the commands the way the person types them where they are (`Spelling`): slash
commands in a session, `talaria checkpoints ...` at the terminal.

`undo` restores the files this session's latest turn changed (that has not been undone) to
their state before it; `restore` restores every file that differs from checkpoint N's
snapshot, and marks the turns from N on as undone. Files go back through `workspace`: in an
editor that writes (`fs/write_text_file`) text files are written there, so the editor shows
the change; binary files, deletions and sessions without an editor use the disk. Files the
turn wrote through the editor come back from their pre-images. A restore is itself a
checkpoint (kind `restore`), so `/restore` of it takes the restore back. The additional
directories a checkpoint covers (`Checkpoint.roots`) are put back with the project. Bad input (nothing
to undo, no such checkpoint) raises CheckpointError before anything is changed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio

from talaria.agent.checkpoints.journal import Checkpoint, Journal
from talaria.agent.checkpoints.shadow import CheckpointError, ShadowRepo
from talaria.tools.errors import TalariaError

VERBS = {"A": "created since → deleted", "M": "modified since → restored",
         "D": "deleted since → recreated", "E": "written in the editor → restored"}
NAMED_FILES = 20
SYMLINK = 0o120000
"""git's mode of a symbolic link: its content is the target, put back as a link on disk."""
"""Files named one by one in a reply; the rest are counted."""


@dataclass(frozen=True, slots=True)
class Spelling:
    """How the person at this front door types the checkpoint commands."""

    listing: str
    restore: str
    """With `{}` for the number."""


SLASH = Spelling("/checkpoints", "/restore {}")
CLI = Spelling("talaria checkpoints list", "talaria checkpoints restore {}")


@dataclass(frozen=True, slots=True)
class Change:
    path: str
    """Relative to the project."""
    status: str
    """A, M or D as the turn changed it; E: written through the editor (a pre-image)."""
    content: bytes | None
    """What to put back; None: delete the file."""
    mode: int | None = None


async def undo(repo: ShadowRepo, journal: Journal, session_id: str, workspace: Any) -> str:
    def pick() -> Checkpoint:
        turns = [c for c in journal.load() if c.kind == "turn" and c.session_id == session_id
                 and not c.undone and c.after is not None]
        if not turns:
            raise CheckpointError("nothing to undo: no turn of this session changed files "
                                  "(/checkpoints lists what can be restored)")
        return turns[-1]

    with_lock = _locked(repo, pick)
    target = await anyio.to_thread.run_sync(with_lock)
    return await _run(repo, journal, target, workspace, session_id, whole=False)


async def restore(repo: ShadowRepo, journal: Journal, number: int, workspace: Any,
                  session_id: str, say: Spelling = SLASH) -> str:
    def pick() -> Checkpoint:
        found = next((c for c in journal.load() if c.number == number), None)
        if found is None:
            raise CheckpointError(f"there is no checkpoint {number} for this project; "
                                  f"{say.listing} lists them")
        return found

    target = await anyio.to_thread.run_sync(_locked(repo, pick))
    return await _run(repo, journal, target, workspace, session_id, whole=True, say=say)


def _locked(repo: ShadowRepo, func: Any) -> Any:
    def run() -> Any:
        with repo.locked():
            return func()
    return run


async def _run(repo: ShadowRepo, journal: Journal, target: Checkpoint, workspace: Any,
               session_id: str, *, whole: bool, say: Spelling = SLASH) -> str:
    label = say.restore.format(target.number) if whole else f"/undo of checkpoint {target.number}"
    now, changes = await anyio.to_thread.run_sync(_plan, repo, journal, target, whole, label)
    what = (f"as they were at checkpoint {target.number}" if whole
            else f"as they were before the turn \"{target.prompt[:60]}\"")
    gone = [f"{d}/ (no longer a directory)" for d in target.roots if d not in now]
    changes, editor_texts, failed = await _apply(repo.project, changes, workspace)
    failed += gone
    if failed and not changes:
        raise CheckpointError(f"could not restore {', '.join(failed[:NAMED_FILES])}; nothing "
                              "was changed")
    if not changes:  # still undone: the next /undo goes further back
        await anyio.to_thread.run_sync(_locked(repo, lambda: _mark_undone(journal, target, whole)))
        return f"Nothing to restore: the files are already {what}."
    record = await anyio.to_thread.run_sync(
        _record, repo, journal, target, now, editor_texts, session_id, label, whole,
        [c.path for c in changes])
    lines = [f"Restored {len(changes)} file(s) {what}:"]
    lines += [f"  {c.path} ({VERBS[c.status]})" for c in changes[:NAMED_FILES]]
    if len(changes) > NAMED_FILES:
        lines.append(f"  … and {len(changes) - NAMED_FILES} more")
    if failed:
        lines.append(f"Could not restore: {', '.join(failed[:NAMED_FILES])}")
    if target.skipped:
        lines.append(f"Not restored (never checkpointed): {', '.join(target.skipped)}")
    if record is not None:
        lines.append(f"This restore is checkpoint {record.number}: "
                     f"{say.restore.format(record.number)} takes it back.")
    return "\n".join(lines)


def _plan(repo: ShadowRepo, journal: Journal, target: Checkpoint, whole: bool,
          label: str) -> tuple[dict[str, str], list[Change]]:
    """(the commit of each root now: "" the project, else an additional directory; the files
    to put back). Each repository under its own lock, never two at once."""
    now: dict[str, str] = {}
    changes: list[Change] = []
    for directory, shas in target.roots.items():
        extra = ShadowRepo(repo.home, Path(directory))
        if not extra.project.is_dir():
            continue  # named in the reply
        with extra.locked():
            now[directory], found = _root_changes(extra, shas["before"], shas.get("after"),
                                                  whole, label)
        changes += [replace(c, path=f"{directory}/{c.path}") for c in found]
    with repo.locked():
        now[""], found = _root_changes(repo, target.before, target.after, whole, label)
        changes += found
        later = [c for c in journal.load() if c.number >= target.number] if whole else [target]
        seen = {c.path for c in changes}
        for checkpoint in later:  # the earliest pre-image of each file wins
            for path, name in checkpoint.pre_images.items():
                if path in seen:
                    continue
                seen.add(path)
                try:
                    text = None if name is None else journal.pre_image(checkpoint.number, name)
                except OSError:
                    continue  # its pre-image is gone: better left alone than guessed
                changes.append(Change(path, "E", None if text is None else text.encode()))
        return now, sorted(changes, key=lambda c: c.path)


def _root_changes(repo: ShadowRepo, before: str | None, after: str | None, whole: bool,
                  label: str) -> tuple[str, list[Change]]:
    """(the root's commit now, its files that differ from `before`: since then for a whole
    restore or an unfinished turn, else those the turn changed). Call with its lock held."""
    now, _ = repo.snapshot(f"before {label}")
    if before is None:
        return now, []
    disk = repo.diff(before, now if whole or after is None else after)
    contents = repo.contents(before, [path for _, path in disk])
    changes = []
    for status, path in disk:
        found = contents.get(path)
        changes.append(Change(path, status, found[0] if found else None,
                              found[1] if found else None))
    return now, changes


async def _apply(project: Path, changes: list[Change], workspace: Any
                 ) -> tuple[list[Change], dict[str, str | None], list[str]]:
    """Put each file back: (the changes made, the editor's texts before them, which are the
    restore's own pre-images, the files that could not be put back with why). A file that
    already holds what it should is left alone. Deletions go first, so a file can come back
    where the turn made a folder (and a folder where it made a file)."""
    through_editor = bool(getattr(workspace, "can_write", False))
    made: list[Change] = []
    before: dict[str, str | None] = {}
    failed: list[str] = []
    for change in sorted(changes, key=lambda c: (c.content is not None, c.path)):
        path = project / change.path
        text = None if change.mode == SYMLINK else _text(change.content)
        editor = change.status == "E" or (through_editor and text is not None)
        try:
            if editor:
                current = await _editor_text(workspace, path)
                if current == text:
                    continue
            elif await anyio.to_thread.run_sync(_disk_state, path) == (change.content, change.mode
                                                                       == SYMLINK):
                continue
            if change.content is not None and text is not None and through_editor:
                await workspace.write_text(path, text)
                before[change.path] = current
            else:
                await anyio.to_thread.run_sync(_write_disk, path, change.content, change.mode)
        except (OSError, TalariaError) as exc:  # the others still go back; this one is named
            failed.append(f"{change.path} ({getattr(exc, 'strerror', None) or exc})")
            continue
        made.append(change)
    return sorted(made, key=lambda c: c.path), before, failed


async def _editor_text(workspace: Any, path: Path) -> str | None:
    try:
        return str(await workspace.read_text(path))
    except FileNotFoundError:
        return None
    except (OSError, TalariaError):
        return ""  # unreadable (binary, too large): not equal to any text it should hold


def _disk_state(path: Path) -> tuple[bytes | None, bool]:
    """(what the path holds, whether it is a symlink): a symlink holds its target."""
    try:
        if path.is_symlink():
            return os.fsencode(os.readlink(path)), True
        return path.read_bytes(), False
    except FileNotFoundError:
        return None, False
    except OSError:
        return b"\0unreadable", False  # never equal to what a checkpoint holds


def _text(content: bytes | None) -> str | None:
    if content is None or b"\x00" in content:
        return None
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _write_disk(path: Path, content: bytes | None, mode: int | None) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir() and content is not None and not any(path.iterdir()):
        path.rmdir()  # the turn made a folder here and its files are gone (deletions go first)
    if content is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode == SYMLINK:
        os.symlink(os.fsdecode(content), path)
        return
    path.write_bytes(content)
    if mode is not None:
        os.chmod(path, 0o755 if mode & 0o111 else 0o644)


def _mark_undone(journal: Journal, target: Checkpoint, whole: bool) -> None:
    """The target turn (and, for a whole restore, every later one) counts as undone."""
    for checkpoint in journal.load():
        if checkpoint.kind == "turn" and not checkpoint.undone and (
                checkpoint.number == target.number or (whole and checkpoint.number >= target.number)):
            checkpoint.undone = True
            journal.update(checkpoint)


def _record(repo: ShadowRepo, journal: Journal, target: Checkpoint, before: dict[str, str],
            editor_texts: dict[str, str | None], session_id: str, label: str,
            whole: bool, restored: list[str]) -> Checkpoint | None:
    """The restore as a checkpoint of its own (None when it changed nothing), each root's
    restored files committed in its repository."""
    changed: list[list[str]] = []
    roots: dict[str, dict[str, str | None]] = {}
    for directory, sha in before.items():
        if not directory:
            continue
        extra, prefix = ShadowRepo(repo.home, Path(directory)), f"{directory}/"
        mine = [p.removeprefix(prefix) for p in restored if p.startswith(prefix)]
        with extra.locked():
            after, _ = extra.snapshot(f"after {label}", mine)
            changed += [[status, prefix + path] for status, path in extra.diff(sha, after)]
        roots[directory] = {"before": sha, "after": after}
    with repo.locked():
        ours = [p for p in restored if not os.path.isabs(p)]
        after, _ = repo.snapshot(f"after {label}", ours)
        changed = [[status, path] for status, path in repo.diff(before[""], after)] + changed
        _mark_undone(journal, target, whole)
        if not changed and not editor_texts:
            return None
        record = journal.add({"kind": "restore", "session_id": session_id, "prompt": label,
                              "before": before[""], "after": after, "changed": changed,
                              "roots": roots})
        record.pre_images = journal.write_pre_images(record.number, editor_texts)
        journal.update(record)
        return record
