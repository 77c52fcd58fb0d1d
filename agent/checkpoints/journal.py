"""The checkpoints of one project: `journal.json` beside its shadow repository.

One `Checkpoint` per turn that changed files (and per restore, so a restore can be undone):
the commits before and after it, the prompt, the files it changed, and the pre-images of files
written through the editor (an editor may keep an edit in an unsaved buffer, which no snapshot
of the disk sees). Pre-images are files under `pre/<number>/`; the journal names them. Numbers
grow and are never reused; the oldest checkpoints beyond `MAX_CHECKPOINTS` are forgotten.
Read and written with the project's lock held (`ShadowRepo.locked`).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MAX_CHECKPOINTS = 200
"""Checkpoints kept per project; older ones are dropped (their pre-images too)."""


@dataclass(slots=True)
class Checkpoint:
    number: int
    kind: str
    """`turn`, or `restore` (taken by /undo, /restore, `talaria checkpoints restore`)."""
    session_id: str
    prompt: str
    before: str
    """Commit of the project before the turn's first change (or before the restore)."""
    after: str | None = None
    """Commit when the turn ended; None while it runs (or if it never ended)."""
    created_at: float = field(default_factory=time.time)
    changed: list[list[str]] = field(default_factory=list)
    """[[status A|M|D, path]] the turn changed (paths relative to the project)."""
    pre_images: dict[str, str | None] = field(default_factory=dict)
    """Path -> file under `pre/<number>/` holding its text before the turn wrote it through the
    editor (None: the file did not exist)."""
    skipped: list[str] = field(default_factory=list)
    """Files left out of the snapshot, with why (size), for the user to know."""
    undone: bool = False
    roots: dict[str, dict[str, str | None]] = field(default_factory=dict)
    """The session's additional directories: directory -> the commits of its own shadow
    repository before and after (`{"before", "after"}`); their files are in `changed` and
    `pre_images` by absolute path."""

    @property
    def paths(self) -> list[str]:
        return sorted({path for _, path in self.changed} | set(self.pre_images))


class Journal:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.path = directory / "journal.json"

    def load(self) -> list[Checkpoint]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError):
            return []  # a damaged journal loses the list, never the project's files
        return [Checkpoint(**row) for row in data.get("checkpoints", []) if isinstance(row, dict)]

    def save(self, checkpoints: list[Checkpoint]) -> None:
        dropped, kept = checkpoints[:-MAX_CHECKPOINTS], checkpoints[-MAX_CHECKPOINTS:]
        for old in dropped:
            shutil.rmtree(self.dir / "pre" / str(old.number), ignore_errors=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"checkpoints": [asdict(c) for c in kept]}, ensure_ascii=False),
                       encoding="utf-8")
        os.replace(tmp, self.path)

    def next_number(self, checkpoints: list[Checkpoint]) -> int:
        marker = self.dir / "last-number"
        try:
            last = int(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            last = 0
        number = max([last, *(c.number for c in checkpoints)]) + 1
        marker.write_text(str(number), encoding="utf-8")
        return number

    def add(self, checkpoint_fields: dict[str, Any]) -> Checkpoint:
        checkpoints = self.load()
        checkpoint = Checkpoint(number=self.next_number(checkpoints), **checkpoint_fields)
        checkpoints.append(checkpoint)
        self.save(checkpoints)
        return checkpoint

    def update(self, checkpoint: Checkpoint) -> None:
        checkpoints = [c for c in self.load() if c.number != checkpoint.number]
        checkpoints.append(checkpoint)
        checkpoints.sort(key=lambda c: c.number)
        self.save(checkpoints)

    def remove(self, number: int) -> None:
        self.save([c for c in self.load() if c.number != number])
        shutil.rmtree(self.dir / "pre" / str(number), ignore_errors=True)

    def write_pre_images(self, number: int, texts: dict[str, str | None]) -> dict[str, str | None]:
        """Store each text under `pre/<number>/`; returns path -> file name (None kept)."""
        folder = self.dir / "pre" / str(number)
        names: dict[str, str | None] = {}
        for i, (path, text) in enumerate(sorted(texts.items())):
            if text is None:
                names[path] = None
                continue
            folder.mkdir(parents=True, exist_ok=True)
            (folder / str(i)).write_text(text, encoding="utf-8", newline="")
            names[path] = str(i)
        return names

    def pre_image(self, number: int, name: str) -> str:
        """A stored pre-image's text; OSError when it is gone."""
        with open(self.dir / "pre" / str(number) / name, encoding="utf-8", newline="") as handle:
            return handle.read()
