"""How a search cuts a tree into parts whose sorted walks, one after another, are the whole
tree's sorted walk (what `rg --sort path` over the root would search, in that order).

Directories are replaced by their entries a whole level at a time, until a level has
UNITS_PER_WORKER entries per worker (or MAX_PLAN_ENTRIES were read). The head, the level's
first HEAD entries, is one part: a page is usually there, and it is known once the level
that will be the last has been cut that far, so the search starts on it before the rest is
read (`Plan.head`). The rest (`Plan.rest`, read when a search needs it) is cut into parts
of about equal weight: a directory's weight is guessed from its link count and size
(`_weight`), and the heaviest are split while one outweighs a part. A tree guessed small
(`Plan._size` under SMALL_TREE), one core, or a file is one part, the root: one rg.
A plan is kept for the tree's next search while what it read is unchanged (`Plan.of`).
"""

from __future__ import annotations

import heapq
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator

from talaria.tools.local.walk import MAX_FILE_BYTES, SKIP_DIRS

MAX_WORKERS = 12
"""rg processes at once, at most (rg's own thread cap)."""
UNITS_PER_WORKER = 24
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
SMALL_TREE = 800
"""A tree guessed smaller (`Plan._size`) is one part: one rg is through before more start
(~2,000 files and less)."""
SAMPLE_DIRS = 32
"""Directories looked at to guess a tree's size."""
MAX_DIR_ENTRIES = 512
"""A directory listing more entries is searched whole (listing them all costs more)."""
MAX_PLANS = 8
"""Trees whose plan is kept for their next search."""
RACY_NS = 2_000_000_000
"""A directory changed this close before its plan was made may change again unseen (its
modification time has a clock tick's grain): that plan is not kept."""

_plans: OrderedDict[tuple[object, ...], Plan] = OrderedDict()
_lock = threading.Lock()


def _key(root: str, n_workers: int) -> tuple[object, ...]:
    """A kept plan's key: its tree, and what shapes a plan."""
    return (root, n_workers, UNITS_PER_WORKER, HEAD_PER_WORKER, PARTS_PER_WORKER, SMALL_TREE,
            MAX_SPLITS, MAX_DIR_ENTRIES, MAX_PLAN_ENTRIES)


def workers() -> int:
    """rg processes to run side by side: the cores this process may use."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    return max(1, min(n, MAX_WORKERS))


class Plan:
    """The parts of `root` for `n_workers`: the head (one part, read first: it reads only
    what it needs), then the rest. One part, the root itself, for one worker, a file root or
    a small tree."""

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
        self.head_units: list[str] | None = None
        self.rest_parts: list[list[str]] | None = None
        self.started_ns = time.time_ns()
        self.read: dict[str, tuple[int, int]] = {}
        """Directories read, with their inode and modification time before the read."""
        self.big: set[str] = set()
        """Files over MAX_FILE_BYTES: a search of contents leaves them out."""
        self.files: set[str] = set()
        """The entries that are files (rg searches a file it is given whatever the globs)."""
        self.reusable = True
        self.lock = threading.Lock()

    @classmethod
    def of(cls, root: str, n_workers: int) -> Plan:
        """The plan of the last search of `root` when what it read is unchanged (its
        directories' inode and modification time, its big files' size), else a new one."""
        with _lock:
            plan = _plans.get(_key(root, n_workers))
        if plan is not None and plan.reusable and plan.unchanged():
            return plan
        return cls(root, n_workers)

    def unchanged(self) -> bool:
        try:
            for path, seen in list(self.read.items()):
                st = os.stat(path)
                if (st.st_ino, st.st_mtime_ns) != seen:
                    return False
            return all(os.stat(path).st_size > MAX_FILE_BYTES for path in list(self.big))
        except OSError:
            return False

    def _keep(self) -> None:
        if not self.reusable:
            return
        key = _key(self.root, self.n_workers)
        with _lock:
            _plans[key] = self
            _plans.move_to_end(key)
            while len(_plans) > MAX_PLANS:
                _plans.popitem(last=False)

    def head(self) -> list[str]:
        """The first entries, one part (the root alone when the tree is one part)."""
        with self.lock:  # a kept plan serves searches side by side
            if self.head_units is None:
                self.head_units = self._head()
                self._keep()
            return self.head_units

    def _head(self) -> list[str]:
        if self.single:
            return [self.root]
        want = HEAD_PER_WORKER * self.n_workers
        while self.units is None and not (self.last and len(self.cut) >= want):
            self._step()
        cut = self.units if self.units is not None else self.cut
        if self._size() < SMALL_TREE:
            self.single = True  # one rg is through sooner than several start
            return [self.root]
        self.n_head = min(want, len(cut))
        return [p for p, _ in cut[:self.n_head]]

    def _size(self) -> float:
        """How big the tree is, in `_weight` units, guessed from the entries of the level cut
        so far and of the level before still to be cut: files by FILE_WEIGHT, directories
        by the `_weight` of a sample of them (SAMPLE_DIRS, evenly spaced)."""
        units = self.units if self.units is not None else [*self.cut, *self.level[self.at:]]
        dirs = [p for p, d in units if d]
        sample = dirs[::max(1, len(dirs) // SAMPLE_DIRS)][:SAMPLE_DIRS]
        mean = sum(map(_weight, sample)) / max(1, len(sample))
        return (len(units) - len(dirs)) * FILE_WEIGHT + len(dirs) * mean

    def rest(self) -> list[list[str]]:
        """The parts after the head, in order, of about equal weight (`_weight`): the
        heaviest directories are split first, while one outweighs a part."""
        with self.lock:
            if self.rest_parts is None:
                self.rest_parts = self._rest()
                self._keep()
            return self.rest_parts

    def _rest(self) -> list[list[str]]:
        if self.single:
            return []
        while self.units is None:
            self._step()
        units = [(p, d, _weight(p) if d else FILE_WEIGHT) for p, d in self.units[self.n_head:]]
        count = PARTS_PER_WORKER * self.n_workers - 1
        total = sum(w for _, _, w in units)
        heavy = [(-w, p) for p, d, w in units if d]
        heapq.heapify(heavy)
        split: dict[str, list[tuple[str, bool, float]]] = {}
        while heavy and self.seen < MAX_PLAN_ENTRIES and len(split) < MAX_SPLITS:
            w, path = heapq.heappop(heavy)
            if -w <= total / count:
                break
            listed = None if path in self.whole else self._list(path)
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
        return [p for p in parts if p]

    def _list(self, path: str) -> list[tuple[str, bool]] | None:
        """`_entries`, noting what a later search must find unchanged to reuse the plan."""
        try:
            st = os.stat(path)  # before reading: a change after it shows
            self.read[path] = (st.st_ino, st.st_mtime_ns)
            if st.st_mtime_ns >= self.started_ns - RACY_NS:
                self.reusable = False  # a change within its clock's tick would not show
        except OSError:
            self.reusable = False
        listed = _entries(path, self.big)
        self.files.update(p for p, is_dir in listed or () if not is_dir)
        return listed

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
            entries = self._list(path)
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


def _entries(path: str, big: set[str]) -> list[tuple[str, bool]] | None:
    """A directory's entries rg's walk searches, sorted by name: not hidden, not a symlink,
    not SKIP_DIRS (rg searches a path it is given whatever its name or kind, so the plan
    leaves out what the walk would). Files over MAX_FILE_BYTES also go to `big`: a search
    of contents leaves them out. None for a directory of more than MAX_DIR_ENTRIES: rg
    walks it whole."""
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
            elif e.is_file(follow_symlinks=False):
                out.append((e.path, False))
                if e.stat(follow_symlinks=False).st_size > MAX_FILE_BYTES:
                    big.add(e.path)
        except OSError:
            continue
    return out
