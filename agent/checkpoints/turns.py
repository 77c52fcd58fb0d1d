"""One session's checkpoints: a snapshot before each turn's first change, closed when it ends.

A session's additional directories are snapshotted with its project, each in its own shadow
repository (`ShadowRepo(home, directory)`); the checkpoint in the project's journal names their
commits (`Checkpoint.roots`) and lists their files by absolute path.

The loop calls `begin_turn(prompt)` and `end_turn()`; the tool runner calls `before_change()`
before any call that may change files (so a turn that only reads costs nothing) and
`record_write(path, old_text)` after a write, keeping the first pre-image of each file the
turn wrote (the editor may hold that write in an unsaved buffer). A turn that changed nothing
leaves no checkpoint. A subagent shares its parent's turn (`nested()`).
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

import anyio

from talaria.agent.checkpoints.journal import Checkpoint, Journal
from talaria.agent.checkpoints.shadow import FILE_LIMIT, CheckpointError, ShadowRepo
from talaria.agent.prompt import flattened

PROMPT_CHARS = 200
"""Characters of a turn's prompt kept with its checkpoint."""


class TurnCheckpoints:
    def __init__(self, home: Path, project: Path, session_id: str,
                 extra: tuple[Path, ...] = ()) -> None:
        self.repo = ShadowRepo(home, project)
        self.extra = [repo for repo in (ShadowRepo(home, directory) for directory in extra)
                      if not repo.project.is_relative_to(self.repo.project)]
        """The session's additional directories (those not inside the project, which its own
        snapshot covers), each snapshotted with the project."""
        self.journal = Journal(self.repo.dir)
        self.session_id = session_id
        self.prompt = ""
        self.current: Checkpoint | None = None
        self.writes: dict[str, str | None] = {}
        self.too_large: list[str] = []
        self.attempted = False
        self.unavailable: str | None = None
        """Why this project cannot be checkpointed (too many files): not retried each turn."""
        self._told: set[str] = set()
        self._lock = anyio.Lock()

    def prime(self) -> threading.Thread:
        """Bring the shadow index up to date in a background thread (call when the session
        starts): git then hashes the project's files now, not during the first turn, whose
        checkpoint only looks at what changed since. Failures are left for that checkpoint."""
        def run() -> None:
            for repo in (self.repo, *self.extra):
                with contextlib.suppress(CheckpointError, OSError), repo.locked():
                    repo.stage()

        thread = threading.Thread(target=run, name="checkpoint-prime", daemon=True)
        thread.start()
        return thread

    def begin_turn(self, prompt: str) -> None:
        self.prompt = flattened(prompt, PROMPT_CHARS)
        self.current, self.writes, self.too_large, self.attempted = None, {}, [], False

    async def before_change(self) -> str | None:
        """Take the turn's checkpoint unless it has one; returns a note for the user when it
        could not (or left files out), once per cause."""
        if self.attempted:
            return None
        async with self._lock:
            if self.attempted:
                return None
            # `attempted` is set only once the snapshot is taken: a second caller (a sibling
            # subagent) waits on the lock instead of changing files the snapshot is reading
            # (its temporary file was seen in the "before" tree).
            try:
                if self.unavailable:
                    return None
                try:
                    self.current = await anyio.to_thread.run_sync(self._take)
                except CheckpointError as exc:
                    if "files" in str(exc):
                        self.unavailable = str(exc)
                    return f"No checkpoint was taken before this turn's changes: {exc}"
            finally:
                self.attempted = True
        skipped = [s for s in self.current.skipped if s not in self._told]
        self._told.update(skipped)
        if skipped:
            return f"Not in the checkpoint (an undo or restore cannot bring them back): {', '.join(skipped)}"
        return None

    def _take(self) -> Checkpoint:
        label = f"before: {self.prompt[:60]}"
        roots, skipped = {}, []
        for repo in self.extra:  # each under its own lock, never two at once (no lock order)
            try:
                with repo.locked():
                    sha, left_out = repo.snapshot(label)
            except (CheckpointError, OSError) as exc:
                skipped.append(f"{repo.project}/ (an additional directory: {exc})")
                continue
            roots[str(repo.project)] = {"before": sha, "after": None}
            skipped += [f"{repo.project}/{entry}" for entry in left_out]
        with self.repo.locked():
            sha, left_out = self.repo.snapshot(label)
            return self.journal.add({"kind": "turn", "session_id": self.session_id,
                                     "prompt": self.prompt, "before": sha,
                                     "skipped": left_out + skipped, "roots": roots})

    def record_write(self, path: str, old_text: str | None) -> None:
        """A file the turn wrote, with its text before (None: it did not exist)."""
        relative = self._key(Path(path).resolve())
        if relative is None:
            return  # outside the project: not ours to checkpoint
        if relative in self.writes or relative in self.too_large:
            return
        if old_text is not None and len(old_text.encode("utf-8", "surrogatepass")) > FILE_LIMIT:
            self.too_large.append(relative)
            return
        self.writes[relative] = old_text

    def _key(self, path: Path) -> str | None:
        """How the journal names a file: relative to the project, by its absolute path in an
        additional directory, None elsewhere."""
        if path.is_relative_to(self.repo.project):
            return str(path.relative_to(self.repo.project))
        return str(path) if any(path.is_relative_to(r.project) for r in self.extra) else None

    async def end_turn(self) -> None:
        checkpoint, writes, self.current = self.current, self.writes, None
        if checkpoint is None:
            return
        # On failure the checkpoint stays without its `after`: a restore diffs against now.
        with contextlib.suppress(CheckpointError):
            await anyio.to_thread.run_sync(self._finish, checkpoint, writes, self.too_large)

    def _finish(self, checkpoint: Checkpoint, writes: dict[str, str | None],
                too_large: list[str]) -> None:
        label = f"after: {self.prompt[:60]}"
        changed = []
        for repo in self.extra:
            shas = checkpoint.roots.get(str(repo.project))
            if shas is None or shas["before"] is None:
                continue
            try:
                with repo.locked():
                    after, _ = repo.snapshot(label)
                    changed += [[status, f"{repo.project}/{path}"]
                                for status, path in repo.diff(shas["before"], after)]
                shas["after"] = after
            except (CheckpointError, OSError):  # without `after`: a restore diffs against now
                continue
        with self.repo.locked():
            sha, _ = self.repo.snapshot(label)
            checkpoint.after = sha
            checkpoint.changed = [[status, path] for status, path in self.repo.diff(
                checkpoint.before, sha)] + changed
            checkpoint.pre_images = self.journal.write_pre_images(checkpoint.number, writes)
            checkpoint.skipped += [f"{p} (its pre-image is larger than {FILE_LIMIT // 2**20} MiB)"
                                   for p in too_large]
            if not checkpoint.changed and not checkpoint.pre_images:
                self.journal.remove(checkpoint.number)  # nothing changed: nothing to undo
            else:
                self.journal.update(checkpoint)

    def nested(self) -> NestedCheckpoints:
        return NestedCheckpoints(self)


class NestedCheckpoints:
    """A subagent's view: its changes join the parent's turn checkpoint."""

    def __init__(self, parent: TurnCheckpoints) -> None:
        self.parent = parent

    def begin_turn(self, prompt: str) -> None:
        pass

    async def end_turn(self) -> None:
        pass

    async def before_change(self) -> str | None:
        return await self.parent.before_change()

    def record_write(self, path: str, old_text: str | None) -> None:
        self.parent.record_write(path, old_text)

    def nested(self) -> NestedCheckpoints:
        return self
