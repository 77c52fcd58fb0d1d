"""How a search cuts a tree into parts whose sorted walks, one after another, are the whole
tree's sorted walk (what `rg --sort path` over the root would search, in that order).

Directories are replaced by their entries a whole level at a time, until a level has
UNITS_PER_WORKER entries per worker (or MAX_PLAN_ENTRIES were read). The first HEAD entries
are parts of their own: a page is usually there, and small parts share it out between the
workers. They are known once the level that will be the last has been cut that far, so the
search starts on them before the rest of the level is read (`Plan.head`, then `Plan.rest`).
"""

from __future__ import annotations

import os

from talaria.tools.local.walk import MAX_FILE_BYTES, SKIP_DIRS

MAX_WORKERS = 12
"""rg processes at once, at most (rg's own thread cap)."""
UNITS_PER_WORKER = 8
"""Entries per worker the last level cut has, at least (unless the tree runs out)."""
MAX_PLAN_ENTRIES = 2_000
"""Entries a plan reads, at most: a directory reached past that is searched whole."""
HEAD_PER_WORKER = 6
"""The first parts, one entry each, per worker."""
PARTS_PER_WORKER = 32
"""Parts per worker in all: more balance the workers, each costs a sentinel (~11 µs)."""


def workers() -> int:
    """rg processes to run side by side: the cores this process may use."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    return max(1, min(n, MAX_WORKERS))


class Plan:
    """The parts of `root` for `n_workers`: `head()` first (it reads only what it needs),
    then `rest()`. One part, the root itself, for one worker or a file root."""

    def __init__(self, root: str, n_workers: int) -> None:
        self.root, self.n_workers = root, n_workers
        self.want = UNITS_PER_WORKER * n_workers
        self.level: list[tuple[str, bool]] = [(root, True)]
        self.cut: list[tuple[str, bool]] = []
        """The next level, cut as far as `self.at` in `level`."""
        self.at = 0
        self.grew = False
        self.last = False
        """The level being cut is the last one: what is cut of it stays."""
        self.units: list[str] | None = None
        self.seen = 0
        self.single = n_workers == 1 or not os.path.isdir(root)
        self.n_head = 0

    def head(self) -> list[list[str]]:
        """The first parts, one entry each (the root alone when the tree is one part)."""
        if self.single:
            return [[self.root]]
        want = HEAD_PER_WORKER * self.n_workers
        while self.units is None and not (self.last and len(self.cut) >= want):
            self._step()
        cut = self.units if self.units is not None else [p for p, _ in self.cut]
        if self.units is not None and len(self.units) < 2 * self.n_workers:
            self.single = True  # too small to share out
            return [[self.root]]
        self.n_head = min(want, len(cut))
        return [[p] for p in cut[:self.n_head]]

    def rest(self) -> list[list[str]]:
        """The parts after the head, their entries shared out evenly in order."""
        if self.single:
            return []
        while self.units is None:
            self._step()
        rest = self.units[self.n_head:]
        count = min(len(rest), PARTS_PER_WORKER * self.n_workers - self.n_head)
        return [rest[len(rest) * i // count:len(rest) * (i + 1) // count] for i in range(count)]

    def _step(self) -> None:
        if self.at == len(self.level):  # a level is cut
            if self.last or not self.grew:
                self.units = [p for p, _ in self.cut]
                return
            self.level, self.cut, self.at, self.grew = self.cut, [], 0, False
            return
        path, is_dir = self.level[self.at]
        self.at += 1
        if is_dir and self.seen < MAX_PLAN_ENTRIES:
            entries = _entries(path)
            self.seen += len(entries)
            self.cut += entries
            self.grew = True
        else:
            self.cut.append((path, is_dir))
        if len(self.cut) + len(self.level) - self.at >= self.want:
            self.last = True


def _entries(path: str) -> list[tuple[str, bool]]:
    """A directory's entries rg's walk searches, sorted by name: not hidden, not a symlink,
    not SKIP_DIRS, not a file over MAX_FILE_BYTES (rg searches a path it is given whatever
    its name, size or kind, so the plan leaves out what the walk would)."""
    try:
        with os.scandir(path) as it:
            entries = [e for e in it if not e.name.startswith(".")]
    except OSError:
        return []
    entries.sort(key=lambda e: e.name)
    out: list[tuple[str, bool]] = []
    for e in entries:
        try:
            if e.is_dir(follow_symlinks=False):
                if e.name not in SKIP_DIRS:
                    out.append((e.path, True))
            elif (e.is_file(follow_symlinks=False)
                  and e.stat(follow_symlinks=False).st_size <= MAX_FILE_BYTES):
                out.append((e.path, False))
        except OSError:
            continue
    return out
