"""How a search cuts a tree into parts whose sorted walks, one after another, are the whole
tree's sorted walk (what `rg --sort path` over the root would search, in that order).

Directories are replaced by their entries a whole level at a time, until a level has
UNITS_PER_WORKER entries per worker (or MAX_PLAN_ENTRIES were read). The head, the level's
first HEAD entries, is one part: a page is usually there, and it is known once the level
that will be the last has been cut that far, so the search starts on it before the rest is
read (`Plan.head`). The rest (`Plan.rest`, or `Plan.work` a step at a time) is cut into
parts of about equal weight: a directory's weight is guessed from its link count and size
(`_weight`), and the heaviest are split while one outweighs a part.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterator

from talaria.tools.local.walk import MAX_FILE_BYTES, SKIP_DIRS

MAX_WORKERS = 12
"""rg processes at once, at most (rg's own thread cap)."""
UNITS_PER_WORKER = 8
"""Entries per worker the last level cut has, at least (unless the tree runs out)."""
MAX_PLAN_ENTRIES = 2_000
"""Entries a plan reads, at most: a directory reached past that is searched whole."""
HEAD_PER_WORKER = 6
"""Entries in the head, per worker."""
PARTS_PER_WORKER = 32
"""Parts per worker in all: more balance the workers (a part is never shared)."""
FILE_WEIGHT = 1 / 16
"""A file's weight in a part, against a directory's `_weight`."""
SUBDIR_WEIGHT = 8
"""A subdirectory's weight in its parent's `_weight`: a tree, not a file."""
MAX_SPLITS = 64
"""Directories `Plan.rest` splits, at most."""
MAX_DIR_ENTRIES = 512
"""A directory listing more entries is searched whole (listing them all costs more)."""


def workers() -> int:
    """rg processes to run side by side: the cores this process may use."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    return max(1, min(n, MAX_WORKERS))


class Plan:
    """The parts of `root` for `n_workers`: the head (one part, read first: it reads only
    what it needs), then the rest (`rest`, or `work` a step at a time). One part, the root
    itself, for one worker, a file root or a small tree."""

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
        self.units: list[tuple[str, bool]] | None = None
        self.seen = 0
        self.whole: set[str] = set()
        """Directories searched whole (too many entries to list)."""
        self.single = n_workers == 1 or not os.path.isdir(root)
        self.n_head = 0
        self._rest: Iterator[None] | None = None
        self.after_head: list[list[str]] = []
        """What `rest` returns, once `work` is through."""

    def head(self) -> list[str]:
        """The first entries, one part (the root alone when the tree is one part)."""
        if self.single:
            return [self.root]
        want = HEAD_PER_WORKER * self.n_workers
        while self.units is None and not (self.last and len(self.cut) >= want):
            self._step()
        cut = self.units if self.units is not None else self.cut
        if self.units is not None and len(self.units) < 2 * self.n_workers:
            self.single = True  # too small to share out
            return [self.root]
        self.n_head = min(want, len(cut))
        return [p for p, _ in cut[:self.n_head]]

    def rest(self) -> list[list[str]]:
        """The parts after the head, in order, of about equal weight (`_weight`): the
        heaviest directories are split first, while one outweighs a part."""
        while self.work():
            pass
        return self.after_head

    def work(self) -> bool:
        """Do a little more of `rest` (one directory read, or some stats): True while there
        is more. A search does it between reads of rg's output."""
        if self._rest is None:
            self._rest = self._rest_steps()
        try:
            next(self._rest)
        except StopIteration:
            return False
        return True

    def _rest_steps(self) -> Iterator[None]:
        if self.single:
            return
        while self.units is None:
            self._step()
            yield
        units: list[tuple[str, bool, float]] = []
        for p, d in self.units[self.n_head:]:
            units.append((p, d, _weight(p) if d else FILE_WEIGHT))
            if len(units) % 64 == 0:
                yield
        count = max(1, PARTS_PER_WORKER * self.n_workers - self.n_head)
        total = sum(w for _, _, w in units)
        heavy = [(-w, p) for p, d, w in units if d]
        heapq.heapify(heavy)
        split: dict[str, list[tuple[str, bool, float]]] = {}
        while heavy and self.seen < MAX_PLAN_ENTRIES and len(split) < MAX_SPLITS:
            yield
            w, path = heapq.heappop(heavy)
            if -w <= total / count:
                break
            listed = None if path in self.whole else _entries(path)
            self.seen += MAX_DIR_ENTRIES if listed is None else len(listed)
            if listed is None:
                continue
            entries = [(p, d, _weight(p) if d else FILE_WEIGHT) for p, d in listed]
            split[path] = entries
            total += w + sum(w for _, _, w in entries)
            for p, d, w in entries:
                if d:
                    heapq.heappush(heavy, (-w, p))
        share = total / count
        parts: list[list[str]] = [[]]
        held = 0.0
        for path, w in _flat(units, split):
            if parts[-1] and held + w > share:
                parts.append([])
                held = 0.0
            parts[-1].append(path)
            held += w
        self.after_head = [p for p in parts if p]

    def _step(self) -> None:
        if self.at == len(self.level):  # a level is cut
            if self.last or not self.grew:
                self.units = self.cut
                return
            self.level, self.cut, self.at, self.grew = self.cut, [], 0, False
            return
        path, is_dir = self.level[self.at]
        self.at += 1
        entries = None
        if is_dir and self.seen < MAX_PLAN_ENTRIES and path not in self.whole:
            entries = _entries(path)
            self.seen += MAX_DIR_ENTRIES if entries is None else len(entries)
        if entries is not None:
            self.cut += entries
            self.grew = True
        else:
            self.whole.add(path)
            self.cut.append((path, is_dir))
        if len(self.cut) + len(self.level) - self.at >= self.want:
            self.last = True


def _weight(path: str) -> float:
    """How much a directory may hold, guessed without reading it: a directory with
    subdirectories (its link count is 2 + their number on most file systems) holds whole
    trees, SUBDIR_WEIGHT each; one without holds its files, which its size counts (a block
    lists some hundred names). At least 1."""
    try:
        st = os.lstat(path)
    except OSError:
        return 1.0
    return float(max(1, (st.st_nlink - 2) * SUBDIR_WEIGHT, st.st_size // 4096))


def _flat(units: list[tuple[str, bool, float]], split: dict[str, list[tuple[str, bool, float]]]
          ) -> Iterator[tuple[str, float]]:
    for path, _, w in units:
        if path in split:
            yield from _flat(split[path], split)
        else:
            yield path, w


def _entries(path: str) -> list[tuple[str, bool]] | None:
    """A directory's entries rg's walk searches, sorted by name: not hidden, not a symlink,
    not SKIP_DIRS, not a file over MAX_FILE_BYTES (rg searches a path it is given whatever
    its name, size or kind, so the plan leaves out what the walk would). None for a
    directory of more than MAX_DIR_ENTRIES: rg walks it whole."""
    entries: list[os.DirEntry[str]] = []
    try:
        with os.scandir(path) as it:
            for e in it:
                if not e.name.startswith("."):
                    entries.append(e)
                    if len(entries) > MAX_DIR_ENTRIES:
                        return None
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
