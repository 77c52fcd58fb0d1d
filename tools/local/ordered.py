"""Several `rg --sort path` processes over the parts of one tree (`talaria.tools.local.plan`),
merged in path order, stopped as soon as the page is known.

One process searches the head, the first part, as one `rg --sort path` would: most pages are
there. When the search is still going after JOIN_AFTER_S without half its page (or the head
is done), the other cores join on the rest: the first process to come takes every part no
process has, the next the second half of the longest list still ahead of another, and each
searches its list forward. After each part of its list a process is given a path that does
not exist, so rg's error for it, on stderr, says the part is done (its output,
line-buffered, is in the pipe before the error is); lines are put in their part by path
(`ripgrep.part_of`). A process that has finished its list, or reaches a part another has
done or is in, takes another half the same way while the victim's pace promises MIN_STEAL_S
of work, so the cores stay busy to the end. The first `cap` matches in path order are known
once every part before the one that completes them is done: a common pattern costs its first
files, a rare one the whole tree on every core. The page is the one a single
`rg --sort path` stopped at `cap` would give, on every call.
"""

from __future__ import annotations

import contextlib
import os
import queue
import secrets
import selectors
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from talaria.tools.local.plan import Plan
from talaria.tools.local.ripgrep import Reader, part_of
from talaria.tools.workspace import SearchMatch, WorkspaceError

JOIN_AFTER_S = 0.02
"""When the other cores join a search still going (a page found sooner costs one process)."""
MIN_STEAL_S = 0.01
"""The least work (by the parts' average time) worth a process of its own: rg's start costs
~3 ms of a core, and a small tree's search ends sooner without."""
MAX_ERRORS = 4096
"""Bytes of rg's own error messages kept, for the error a failed search gives."""
_CHUNK = 1 << 16

_dying: queue.SimpleQueue[subprocess.Popen[bytes]] = queue.SimpleQueue()
_reaper: list[threading.Thread] = []


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Wait for a killed process on a thread of its own, so that it leaves no zombie."""
    _dying.put(proc)
    if not _reaper:
        _reaper.append(threading.Thread(target=_wait_all, name="rg-reaper", daemon=True))
        _reaper[0].start()


def _wait_all() -> None:
    while True:
        _dying.get().wait()


class _Children:
    """The rg processes of one search. Closed when the search ends or is cancelled (its
    thread is then abandoned, and may still start one: that one is killed at once)."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.closed = False

    def add(self, proc: subprocess.Popen[bytes]) -> None:
        self.procs.append(proc)
        if self.closed:
            proc.kill()
            raise WorkspaceError("search cancelled")

    def close(self) -> None:
        self.closed = True
        for proc in list(self.procs):
            with contextlib.suppress(ProcessLookupError):
                proc.kill()


@dataclass(slots=True, eq=False)
class _Worker:
    proc: subprocess.Popen[bytes]
    seq: list[int]
    """Part indices in the order this process searches them."""
    reader: Reader
    pos: int = 0
    """`seq[pos]` is the part it is in, since `entered`."""
    entered: float = field(default_factory=time.monotonic)
    started: float = field(default_factory=time.monotonic)
    rest: dict[int, bytes] = field(default_factory=dict)
    """Per pipe, the line begun and not ended."""
    errors: bytearray = field(default_factory=bytearray)
    open: int = 2
    """Pipes not at their end."""

    def current(self) -> int | None:
        return self.seq[self.pos] if self.pos < len(self.seq) else None


async def run(argv: list[str], plan: Plan, reader: Callable[[Callable[[str], int] | int], Reader],
              cap: int, keep: Callable[[str], bool], *, sized: bool
              ) -> tuple[list[SearchMatch], bool]:
    """The first `cap` matches of `argv` over the parts of `plan`, in order, and whether rg
    refused the pattern. `reader(part)` makes a process's reader (`part`: its lines' part);
    `keep(path)` says whether a file the plan names is searched at all, and `sized` leaves
    out those over MAX_FILE_BYTES (rg would search a file it is given whatever its globs or
    size). A worker thread reads the pipes: an asyncio subprocess costs a child-watcher
    thread and a loop wake-up per chunk, more than a page."""
    children = _Children()
    try:
        merge = _Merge(argv, plan.head(), reader, cap, children)
        merge.skip = lambda path: path in plan.files and (
            sized and path in plan.big or not keep(path))
        return await anyio.to_thread.run_sync(merge.run, plan, abandon_on_cancel=True)
    finally:
        children.close()  # cancelled: the thread is abandoned, rg must not run on


class _Merge:
    def __init__(self, argv: list[str], head: list[str],
                 reader: Callable[[Callable[[str], int] | int], Reader], cap: int,
                 children: _Children) -> None:
        self.argv, self.parts, self.reader, self.cap = argv, [head], reader, cap
        self.children = children
        self.done: list[list[SearchMatch] | None] = [None]
        self.first = 0
        """The first part not done; `before` matches are in the parts before it."""
        self.before = 0
        self.limit = 1
        """Parts from here on cannot reach the page (a part before holds `cap` matches)."""
        self.running: list[_Worker] = []
        self.slots = 1
        """Processes that may run at once: one, then one per core after JOIN_AFTER_S."""
        self.refused = False
        self.plan: Plan | None = None
        self.missing = os.path.join(tempfile.gettempdir(), f".talaria-{secrets.token_hex(8)}-")
        """Arguments after a part: this plus the part's index, a path that does not exist."""
        self.mark = os.fsencode(self.missing)
        self.sel = selectors.DefaultSelector()
        self.skip: Callable[[str], bool] = lambda path: False

    def run(self, plan: Plan) -> tuple[list[SearchMatch], bool]:
        self.plan = None if plan.single else plan
        join_at = time.monotonic() + JOIN_AFTER_S
        try:
            if any(not self.skip(p) for p in self.parts[0]):
                self._start([0])
            else:  # nothing in the head to search (no rg given no path: it would search `.`)
                self._record(0, [])
                self._fill()
            joins = self.plan is not None and plan.n_workers > self.slots
            if joins and JOIN_AFTER_S <= 0:
                self.slots, joins = plan.n_workers, False
                self._fill()
            while self.running and not self._known() and not self.children.closed:
                wait = join_at - time.monotonic() if joins else None
                if wait is not None and wait <= 0:
                    if self.before + len(self._partial()) >= self.cap // 2:
                        join_at += JOIN_AFTER_S  # half the page is found: it will be soon
                        continue
                    self.slots, joins = plan.n_workers, False
                    self._fill()
                    continue
                for key, _ in self.sel.select(wait):
                    worker, fd = key.data
                    if worker in self.running:  # not stopped by an earlier event
                        self._read(worker, fd)
            return self._found(), self.refused
        finally:
            for worker in list(self.running):
                self._stop(worker)
            self.sel.close()

    def _rest(self) -> None:
        """The parts after the head, read when first needed (a page in the head needs none)."""
        if self.plan is None:
            return
        rest, self.plan = self.plan.rest(), None
        if self.limit == len(self.parts):
            self.limit += len(rest)
        self.parts += rest
        self.done += [None] * len(rest)

    def _known(self) -> bool:
        while self.first < self.limit and self.done[self.first] is not None:
            self.before += len(self.done[self.first] or ())
            self.first += 1
            if self.first == self.limit:
                self._rest()
        if self.first >= self.limit or self.before >= self.cap:
            return True
        return self.before + len(self._partial()) >= self.cap

    def _partial(self) -> list[SearchMatch]:
        """The first unfinished part's matches found so far (a prefix of them, whoever is in
        it)."""
        inside = [w.reader.outs.get(self.first, []) for w in self.running
                  if w.current() == self.first]
        return sorted(inside, key=len)[-1] if inside else []

    def _found(self) -> list[SearchMatch]:
        out: list[SearchMatch] = []
        for matches in self.done[:self.first]:
            out += matches or ()
        if self.first < self.limit:
            out += self._partial()
        return out[:self.cap]

    def _start(self, seq: list[int]) -> None:
        part: Callable[[str], int] | int = seq[0]
        flush = []
        if seq == [0]:  # the head: as one rg would, done when it ends
            args = [p for p in self.parts[0] if not self.skip(p)]
        else:
            args = [a for i in seq for a in (*(p for p in self.parts[i] if not self.skip(p)),
                                                  f"{self.missing}{i}")]
            part = part_of({p: i for i in seq for p in self.parts[i]})
            # rg writes to a pipe in blocks: a part's lines must be in it before its end is
            flush = ["--line-buffered"]
        proc = subprocess.Popen([*self.argv, *flush, "--", *args],
                                stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
        self.children.add(proc)
        worker = _Worker(proc, seq, self.reader(part))
        self.running.append(worker)
        for pipe in (proc.stdout, proc.stderr):
            assert pipe is not None
            os.set_blocking(pipe.fileno(), False)
            worker.rest[pipe.fileno()] = b""
            self.sel.register(pipe, selectors.EVENT_READ, (worker, pipe.fileno()))

    def _stop(self, worker: _Worker) -> None:
        """Stop a process still searching (waiting for it to die would hold up the page)."""
        self._close(worker)
        worker.proc.kill()
        _reap(worker.proc)

    def _close(self, worker: _Worker) -> None:
        self.running.remove(worker)
        for pipe in (worker.proc.stdout, worker.proc.stderr):
            assert pipe is not None
            with contextlib.suppress(KeyError):
                self.sel.unregister(pipe)
            pipe.close()

    def _read(self, worker: _Worker, fd: int) -> None:
        try:
            chunk = os.read(fd, _CHUNK)
        except BlockingIOError:
            return
        if not chunk:
            self.sel.unregister(fd)
            worker.open -= 1
            if not worker.open:
                self._ended(worker)
            return
        lines = (worker.rest[fd] + chunk).split(b"\n")
        worker.rest[fd] = lines.pop()
        assert worker.proc.stdout is not None
        if fd == worker.proc.stdout.fileno():
            for line in lines:
                worker.reader.take(line)
            return
        for line in lines:
            if self.mark in line:
                self._drain(worker)  # the part's lines came before its end
                self._finished_part(worker, int(line.split(self.mark, 1)[1].split(b":", 1)[0]))
                if worker not in self.running:
                    return
            elif len(worker.errors) < MAX_ERRORS:
                worker.errors += line + b"\n"

    def _drain(self, worker: _Worker) -> None:
        assert worker.proc.stdout is not None
        fd = worker.proc.stdout.fileno()
        with contextlib.suppress(BlockingIOError, OSError):
            while chunk := os.read(fd, _CHUNK):
                lines = (worker.rest[fd] + chunk).split(b"\n")
                worker.rest[fd] = lines.pop()
                for line in lines:
                    worker.reader.take(line)

    def _ended(self, worker: _Worker) -> None:
        self._close(worker)
        code = worker.proc.wait()
        if code == 2 and not any(worker.reader.outs.values()) and b"regex" in worker.errors:
            self.refused = True  # rg rejects the pattern (every process alike): Python's turn
            for other in list(self.running):
                self._stop(other)
            return
        if worker.seq == [0]:  # the head: its end is the part's
            self._record(worker.seq[0], worker.reader.outs.get(worker.seq[0], []))
            worker.pos = 1
        elif worker.pos < len(worker.seq):  # it ended before its list did
            raise WorkspaceError(f"ripgrep stopped early (exit {code}): "
                                 f"{worker.errors.decode(errors='replace')[-300:]}")
        self._fill()

    def _record(self, part: int, matches: list[SearchMatch]) -> None:
        if self.done[part] is None:
            self.done[part] = list(matches)
            if len(matches) >= self.cap:
                self.limit = min(self.limit, part + 1)

    def _finished_part(self, worker: _Worker, part: int) -> None:
        if part != worker.current():
            raise WorkspaceError(f"ripgrep ended part {part} in part {worker.current()}")
        self._record(part, worker.reader.outs.pop(part, []))
        worker.pos += 1
        worker.entered = time.monotonic()
        for other in list(self.running):
            if other in self.running and self._idle(other):
                self._stop(other)
        self._fill()

    def _idle(self, worker: _Worker) -> bool:
        """In a done part, in one another process entered first, or with nothing useful
        ahead: it would only repeat work."""
        now = worker.current()
        if now is None:
            return False
        if self.done[now] is not None or not self._todo(worker.seq[worker.pos:]):
            return True
        return any(o is not worker and o.current() == now and o.entered < worker.entered
                   for o in self.running)

    def _todo(self, seq: list[int]) -> list[int]:
        return [i for i in seq if i < self.limit and self.done[i] is None]

    def _fill(self) -> None:
        while len(self.running) < self.slots and self._take():
            pass

    def _take(self) -> bool:
        """A slot is free: start a process on the parts no list reaches, or on the second
        half of the longest list still ahead of another. False when there is nothing to take."""
        if self.refused or self._known():
            return False
        self._rest()
        ahead = [self._todo(o.seq[o.pos + 1:]) for o in self.running]
        covered = {i for todo in ahead for i in todo} | {o.current() for o in self.running}
        orphans = [i for i in range(self.first, self.limit)
                   if self.done[i] is None and i not in covered]
        if orphans:
            self._start(orphans)
            return True
        now = time.monotonic()
        todo, victim = max(zip(ahead, self.running, strict=True), key=lambda t: len(t[0]),
                           default=([], None))
        half = todo[len(todo) // 2:]
        if not half or victim is None:
            return False
        per_part = (now - victim.started) / (victim.pos + 1)  # the one it is in counts
        if len(half) * per_part < MIN_STEAL_S:
            return False  # a process costs more than it would take over
        self._start(half)
        return True

