"""Several `rg --sort path` processes over the parts of one tree (`talaria.tools.local.plan`),
merged in path order, stopped as soon as the page is known.

One process starts on the first parts (few arguments: rg reads them all before it starts),
and alone it finds most pages, as one `rg --sort path` would. When the search is still going
after JOIN_AFTER_S, one process per other core joins: each takes the second half of the
longest list of parts still ahead of another and searches it forward. A sentinel after each
part says where each process is; one that has finished a part, or reaches a part another
has done or is in, takes another half the same way, so the cores stay busy to the end. The
first `cap` matches in path order are known once every part before the one that completes
them is done: a common pattern costs its first files, a rare one the whole tree on every
core. The page is the one a single `rg --sort path` stopped at `cap` would give, every call.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import selectors
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO

import anyio

from talaria.tools.local.plan import Plan
from talaria.tools.local.ripgrep import Reader
from talaria.tools.workspace import SearchMatch, WorkspaceError

JOIN_AFTER_S = 0.01
"""When the other cores join a search still going (a page found sooner costs one process)."""
_CHUNK = 1 << 16


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


@dataclass(slots=True)
class _Worker:
    proc: subprocess.Popen[bytes]
    seq: list[int]
    """Part indices in the order this process searches them."""
    reader: Reader
    pos: int = 0
    """`seq[pos]` is the part it is in, since `entered`."""
    entered: float = field(default_factory=time.monotonic)
    rest: bytes = field(default=b"")

    def current(self) -> int | None:
        return self.seq[self.pos] if self.pos < len(self.seq) else None


async def run(argv: list[str], plan: Plan, reader: Callable[[str | None], Reader], cap: int,
              *, content: bool) -> tuple[list[SearchMatch], bool]:
    """The first `cap` matches of `argv` over the parts of `plan`, in order, and whether rg
    refused the pattern. `reader(sentinel)` makes a process's reader; the sentinel is None
    when one process searches everything. A worker thread reads the pipes: an asyncio
    subprocess costs a child-watcher thread and a loop wake-up per chunk, more than a page."""
    children = _Children()
    sentinel = None
    try:
        head = plan.head()
        if not plan.single:
            token = secrets.token_hex(12)
            sentinel = os.path.join(tempfile.gettempdir(), f".talaria-search-{token}")
            with open(sentinel, "w") as f:  # hidden: no walk finds it, only its own arguments
                f.write(token + "\n")
            if content:
                argv = [*argv, "-e", token]
        with tempfile.TemporaryFile() as err:
            merge = _Merge(argv, head, lambda: reader(sentinel), cap, sentinel, err, children)
            return await anyio.to_thread.run_sync(merge.run, plan, abandon_on_cancel=True)
    finally:
        children.close()  # cancelled: the thread is abandoned, rg must not run on
        if sentinel is not None:
            with contextlib.suppress(OSError):
                os.unlink(sentinel)


class _Merge:
    def __init__(self, argv: list[str], head: list[list[str]], reader: Callable[[], Reader],
                 cap: int, sentinel: str | None, err: IO[bytes], children: _Children) -> None:
        self.argv, self.parts, self.reader, self.cap = argv, list(head), reader, cap
        self.sentinel, self.err, self.children = sentinel, err, children
        self.done: list[list[SearchMatch] | None] = [None] * len(head)
        self.head = 0
        """The first part not done; `before` matches are in the parts before it."""
        self.before = 0
        self.limit = len(head)
        """Parts from here on cannot reach the page (a part before holds `cap` matches)."""
        self.running: list[_Worker] = []
        self.slots = 1
        """Processes that may run at once: one, then one per core after JOIN_AFTER_S."""
        self.refused = False
        self.sel = selectors.DefaultSelector()

    def run(self, plan: Plan) -> tuple[list[SearchMatch], bool]:
        join_at = time.monotonic() + JOIN_AFTER_S
        n = len(self.parts)
        w = min(plan.n_workers, n) if JOIN_AFTER_S <= 0 else 1
        self.slots = w
        try:
            for k in range(w):
                self._start(list(range(k, n, w)))
            rest = plan.rest()  # read while rg starts
            self.parts += rest
            self.done += [None] * len(rest)
            self.limit = len(self.parts)
            joins = self.sentinel is not None and plan.n_workers > self.slots
            while self.running and not self._known() and not self.children.closed:
                wait = join_at - time.monotonic() if joins else None
                if wait is not None and wait <= 0:
                    self.slots, joins = plan.n_workers, False
                    self._fill()
                    continue
                for key, _ in self.sel.select(wait):
                    if key.data in self.running:  # not stopped by an earlier event
                        self._read(key.data)
            return self._found(), self.refused
        finally:
            for worker in list(self.running):
                self._stop(worker)
            self.sel.close()

    def _known(self) -> bool:
        while self.head < self.limit and self.done[self.head] is not None:
            self.before += len(self.done[self.head] or ())
            self.head += 1
        if self.head >= self.limit or self.before >= self.cap:
            return True
        return self.before + self._partial() >= self.cap

    def _partial(self) -> int:
        """Matches found so far in the head part (a prefix of its matches, whoever is in it)."""
        return max((len(w.reader.out) for w in self.running if w.current() == self.head),
                   default=0)

    def _found(self) -> list[SearchMatch]:
        out: list[SearchMatch] = []
        for matches in self.done[:self.head]:
            out += matches or ()
        if self.head < self.limit:
            inside = [w.reader.out for w in self.running if w.current() == self.head]
            out += sorted(inside, key=len)[-1] if inside else []
        return out[:self.cap]

    def _start(self, seq: list[int]) -> None:
        paths = [self.parts[seq[0]][0]] if self.sentinel is None else [
            p for i in seq for p in (*self.parts[i], self.sentinel)]
        # rg writes to a pipe in blocks: past the first process, which finds most pages and
        # reads its output whole, a sentinel must arrive when its part is done
        flush = ["--line-buffered"] if self.children.procs else []
        proc = subprocess.Popen([*self.argv, *flush, "--", *paths], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=self.err, bufsize=0)
        self.children.add(proc)
        worker = _Worker(proc, seq, self.reader())
        self.running.append(worker)
        assert proc.stdout is not None
        self.sel.register(proc.stdout, selectors.EVENT_READ, worker)

    def _stop(self, worker: _Worker) -> int | None:
        self.running.remove(worker)
        assert worker.proc.stdout is not None
        self.sel.unregister(worker.proc.stdout)
        if worker.proc.poll() is None:
            worker.proc.kill()
        worker.proc.stdout.close()
        return worker.proc.wait()

    def _read(self, worker: _Worker) -> None:
        assert worker.proc.stdout is not None
        chunk = os.read(worker.proc.stdout.fileno(), _CHUNK)
        if not chunk:
            self._ended(worker)
            return
        lines = (worker.rest + chunk).split(b"\n")
        worker.rest = lines.pop()
        for line in lines:
            if worker.reader.take(line):
                self._finished_part(worker)
                if worker not in self.running:
                    return

    def _ended(self, worker: _Worker) -> None:
        code = self._stop(worker)
        if worker.pos < len(worker.seq):  # rg ended inside its list: refused, or failed
            errors = os.pread(self.err.fileno(), 4096, 0)
            if code == 2 and not worker.reader.out and b"regex" in errors:
                self.refused = True  # every process fails alike: Python takes over
                for other in list(self.running):
                    self._stop(other)
                return
            if self.sentinel is not None:
                raise WorkspaceError(f"ripgrep stopped early (exit {code}): "
                                     f"{errors.decode(errors='replace')[-300:]}")
            self._record(0, worker.reader.out)  # one process, one part: its end is the part's
        self._fill()

    def _record(self, part: int, matches: list[SearchMatch]) -> None:
        if self.done[part] is None:
            self.done[part] = list(matches)
            if len(matches) >= self.cap:
                self.limit = min(self.limit, part + 1)

    def _finished_part(self, worker: _Worker) -> None:
        self._record(worker.seq[worker.pos], worker.reader.out)
        worker.reader.out.clear()
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
        ahead = [self._todo(o.seq[o.pos + 1:]) for o in self.running]
        covered = {i for todo in ahead for i in todo} | {o.current() for o in self.running}
        orphans = [i for i in range(self.head, self.limit)
                   if self.done[i] is None and i not in covered]
        if orphans:
            self._start(orphans)
            return True
        longest = max(ahead, key=len, default=[])
        if len(longest) < 2:
            return False
        self._start(longest[len(longest) // 2:])
        return True
