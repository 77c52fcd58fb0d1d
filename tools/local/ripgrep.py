"""ripgrep behind the local search: one parallel rg per search, read as far as a page needs
and left waiting between pages.

rg walks a tree on all cores and prints each file's matches in one piece, files in the order
they finish (`--sort path` would keep it on one thread: ~1.5x slower over a big tree, and a
sorted page of a rare glob has to walk to it). A search reads rg's output until it has the
matches its page asks for and one more, then stops reading: rg fills the pipe and waits,
using no CPU. The run is kept (`Runs`, a few at a time, by the workspace that asked and the
query), so the next page of the same query reads on from where the last stopped: pages of
one run neither repeat nor skip a match, whatever order rg found them in. A search at offset
0 always starts a new run (files may have changed since), so two first pages of a big result
may hold different matches; each page is put in path order before it is shown.

A search's time over raw rg's is Python's, mostly paid after an idle pause or another
process's walk, when little of it is in the CPU's caches: rg is started first (`_spawn`,
`os.posix_spawn`), a read's records are taken in one loop, and a match is decoded only when a
page shows it (`rg_json.Found.page`).
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import Any

import anyio

from talaria.tools.local.rg_json import Found, Lines, Names

MAX_RUNS = 4
"""Runs kept for their next page, in this process (the least recently used is stopped);
each is an rg waiting with ~6.5 MB resident, most of it its shared binary."""
RUN_IDLE_S = 300.0
"""A run not read for this long is stopped (by the reaper's sweep, or the next search's)."""
SWEEP_S = 60.0
"""How often the reaper thread looks for idle runs."""
MAX_ERRORS = 4096
"""Bytes of rg's own error messages kept, to tell a pattern it refused."""
CHUNK_BYTES = 1 << 16
"""What one read of the pipe takes."""


class Run:
    """One rg process and what has been read of it. `read` (on the event loop: its pipe read
    as it becomes readable, no thread to wake) reads on to a cap; between reads rg waits on
    its full pipe."""

    def __init__(self, argv: list[str], reader: Lines | Names) -> None:
        self.reader = reader
        self.errors = _error_file()
        """rg's stderr, read to tell a pattern it refused (a file: rg never blocks on it)."""
        self.proc = _spawn(argv, self.errors)
        self.fd = self.proc.stdout
        os.set_blocking(self.fd, False)
        self.rest = b""
        """Output read and not yet taken: a line's start, or the lines after a full page."""
        self.complete = False
        self.refused = False
        self.stopped = False
        self.closed = False
        self.reading = False
        """A read is under way: it closes the run when it ends (the reaper leaves it)."""
        self.retired = False
        """No longer kept (`retire`): stopped once the reads under way end."""
        self.readers = 0
        """Reads under way or waiting their turn (on the event loop)."""
        self.used = time.monotonic()
        self._lock = threading.Lock()
        self._turn: anyio.Lock | None = None
        """Held by the read under way; taken without a trip through the event loop when free
        (`fast_acquire`: a search's one read, ~70 µs less)."""

    async def read(self, cap: int) -> Found:
        """Read until `cap` matches are found (whole files: there may be more) or rg ends.
        Cancelled, it leaves the run to be stopped (`Runs.discard`)."""
        self.readers += 1  # before any wait: `retire` must see this read coming
        try:
            return await self._take_turn(cap)
        finally:
            self.readers -= 1
            if self.retired and not self.readers and not self.stopped:
                self.stop()  # replaced while these reads went on: it ends with them

    async def _take_turn(self, cap: int) -> Found:
        if self._turn is None:
            self._turn = anyio.Lock(fast_acquire=True)
        async with self._turn:  # two pages of one search at once: one after the other
            self.used = time.monotonic()
            found = self.reader.found
            if not (self.complete or self.stopped or len(found) >= cap):
                with self._lock:
                    if self.closed:
                        return Found(list(found), False)
                    self.reading = True
                try:
                    await self._read(cap)
                finally:
                    with self._lock:
                        self.reading = False
                    if self.stopped and not self.closed:
                        _reap(self)
            full = len(found) >= self.reader.most
            return Found(list(found), self.complete and not full, self.refused)

    async def _read(self, cap: int) -> None:
        if len(self.reader.found) >= self.reader.most:
            return self.stop()  # no further page
        feed = self.reader.feed
        while not self.stopped:
            at, full = feed(self.rest, cap)  # lines left from the last read first
            if at:
                self.rest = self.rest[at:]  # (no split of a whole read into lines)
            if full:
                if len(self.reader.found) >= self.reader.most:
                    self.stop()
                return
            await anyio.wait_readable(self.fd)
            try:
                chunk = os.read(self.fd, CHUNK_BYTES)
            except BlockingIOError:
                continue
            if not chunk:  # rg is done, its lines all taken
                await self._ended()
                return
            self.rest += chunk

    async def _ended(self) -> None:
        if self.rest and not self.stopped:  # a last line with no newline
            self.reader.take(self.rest, len(self.reader.found) + 1)
        self.rest = b""
        returncode = await anyio.to_thread.run_sync(self.proc.wait)
        if self.stopped:
            return
        self.complete = True
        self.refused = (returncode == 2 and not self.reader.found
                        and b"regex" in os.pread(self.errors, MAX_ERRORS, 0))
        self.stopped = True
        with self._lock:
            self._close()

    def stop(self) -> None:
        """Stop rg (a cancelled search, an evicted run, a page asked anew) on the reaper
        thread: the search that stops it does not wait for the kill or for rg to go; a read
        under way ends as soon as rg is killed, and closes the run."""
        self.stopped = True
        _reap(self)

    def retire(self) -> None:
        """No longer kept: stopped now, or, when a read is under way (another page of the
        search, asked at the same time), once it ends, so that read's page is whole."""
        self.retired = True
        if not self.readers:
            self.stop()

    def reaped(self) -> None:
        """On the reaper thread: kill rg, wait for it, close what it used (unless a read is
        under way: the kill ends it, and it closes the run)."""
        self._kill()
        with self._lock:
            if not self.closed and not self.reading:
                self.proc.wait()
                self._close()

    def _kill(self) -> None:
        self.proc.kill()

    def _close(self) -> None:
        self.proc.close()
        os.close(self.errors)
        self.closed = True


class _Spawned:
    """rg started by `os.posix_spawn`: `subprocess.Popen`'s setup cost every search 0.1 ms
    more (its own Python, and what it supports that rg does not need). Its stdout is a pipe;
    stdin /dev/null. It is reaped once, and never signalled after (`kill`, `wait`: its pid
    may then be another process's)."""

    def __init__(self, argv: list[str], errors: int) -> None:
        read, write = os.pipe2(os.O_CLOEXEC)
        try:
            self.pid = os.posix_spawn(argv[0], argv, _environ(), file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, write, 1),
                (os.POSIX_SPAWN_DUP2, errors, 2),
            ])
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)
        self.stdout = read
        self.returncode: int | None = None
        self._reaping = threading.Lock()

    def kill(self) -> None:
        with self._reaping:
            if self.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)

    def wait(self) -> int:
        """Its exit code (minus the signal that ended it), once it has ended."""
        if self.returncode is None:
            with contextlib.suppress(ChildProcessError):  # waited for by this, in another thread
                os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)  # ended, not yet reaped
            with self._reaping:
                if self.returncode is None:
                    try:
                        _, status = os.waitpid(self.pid, 0)
                        self.returncode = os.waitstatus_to_exitcode(status)
                    except ChildProcessError:  # reaped by another (as `subprocess` takes it)
                        self.returncode = 0
        return self.returncode

    def close(self) -> None:
        os.close(self.stdout)


def _environ() -> Mapping[Any, Any]:
    """This process's environment, as `posix_spawn` takes it fastest: `os.environ`'s own
    bytes (what `os.environ` keeps in step with the process's), not `os.environ` itself,
    whose every name and value `posix_spawn` would read through Python, 20 µs a spawn."""
    data = getattr(os.environ, "_data", None)
    return data if isinstance(data, dict) else os.environ


class _Popened:
    """rg by `subprocess.Popen`, where the system has no `posix_spawn` or `waitid` (macOS)."""

    def __init__(self, argv: list[str], errors: int) -> None:
        self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=errors)
        assert self._proc.stdout is not None
        self.stdout = self._proc.stdout.fileno()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self._proc.kill()

    def wait(self) -> int:
        return self._proc.wait()

    def close(self) -> None:
        assert self._proc.stdout is not None
        self._proc.stdout.close()


def _spawn(argv: list[str], errors: int) -> _Spawned | _Popened:
    """rg with `argv` (its path first; paths in it absolute: it runs in this process's
    directory), its errors to `errors`."""
    if hasattr(os, "posix_spawn") and hasattr(os, "waitid"):
        return _Spawned(argv, errors)
    return _Popened(argv, errors)


def _error_file() -> int:
    """A file descriptor for rg's stderr, in memory where the system has it (a temporary
    file's setup cost a search 0.15 ms after an idle pause)."""
    if hasattr(os, "memfd_create"):
        return os.memfd_create("talaria-rg-errors", os.MFD_CLOEXEC)
    import tempfile  # at a search, not at start (it loads `random`, `shutil`)

    fd, path = tempfile.mkstemp()
    os.unlink(path)  # only the descriptor is used
    return fd


_reaping: queue.SimpleQueue[Run] = queue.SimpleQueue()
_reaper: threading.Thread | None = None
_reaper_lock = threading.Lock()


def _reap(run: Run) -> None:
    """Hand a run to stop to the reaper thread."""
    _reaping.put(run)
    _reaper_started()


def _reaper_started() -> None:
    """The reaper thread (started on first use): it stops and reaps runs handed to it, and
    every SWEEP_S stops the runs idle past RUN_IDLE_S (an idle agent keeps none)."""
    global _reaper
    with _reaper_lock:
        if _reaper is None:
            _reaper = threading.Thread(target=_reap_forever, name="talaria-rg-reaper",
                                       daemon=True)
            _reaper.start()


def _reap_forever() -> None:
    while True:
        try:
            run = _reaping.get(timeout=SWEEP_S)
        except queue.Empty:
            RUNS.settle()
            continue
        run.reaped()


class Runs:
    """The runs kept for their next page: at most MAX_RUNS, none idle past RUN_IDLE_S. Used on
    the event loop (where the runs are read) and by the reaper's sweeps."""

    def __init__(self) -> None:
        self._runs: OrderedDict[Hashable, Run] = OrderedDict()
        self._leaving: list[Run] = []
        """Pushed out by `start`, stopped at `settle`."""
        self._lock = threading.RLock()

    def get(self, key: Hashable) -> Run | None:
        """The run kept for `key`, still usable, or None."""
        with self._lock:
            self.sweep()
            run = self._runs.get(key)
            if run is None or (run.stopped and not run.complete):
                return None
            self._runs.move_to_end(key)
            return run

    def start(self, key: Hashable, argv: list[str], reader: Lines | Names) -> Run:
        """A new run for `key`, in place of any before it. The runs it pushes out (the one
        before it for `key`, the least recently used past MAX_RUNS, the idle) are stopped at
        `settle()`: killing them while the new rg starts took the CPU it needed."""
        run = Run(argv, reader)
        with self._lock:
            old = self._runs.pop(key, None)
            if old is not None:
                self._leaving.append(old)
            self._runs[key] = run
            while len(self._runs) > MAX_RUNS:
                self._leaving.append(self._runs.popitem(last=False)[1])
        _reaper_started()  # its sweeps stop the run if it is left idle
        return run

    def settle(self) -> None:
        """Stop the runs `start` pushed out, and the idle ones."""
        with self._lock:
            leaving, self._leaving = self._leaving, []
            self.sweep()
        for run in leaving:
            run.retire()

    def drop(self, key: Hashable) -> None:
        """Forget the run for `key`, if any, and retire it (`Run.retire`)."""
        with self._lock:
            run = self._runs.pop(key, None)
        if run is not None:
            run.retire()

    def discard(self, key: Hashable, run: Run) -> None:
        """Stop `run` now (its search was cancelled or timed out), and forget it if it is
        still the one kept for `key` (a newer search may have taken its place)."""
        with self._lock:
            if self._runs.get(key) is run:
                del self._runs[key]
        run.stop()

    def forget(self, owner: Hashable) -> None:
        """Stop the runs of `owner` (the first item of their keys)."""
        with self._lock:
            for key in [k for k in self._runs if isinstance(k, tuple) and k and k[0] is owner]:
                self.drop(key)

    def clear(self) -> None:
        """Stop every run."""
        self.settle()
        with self._lock:
            while self._runs:
                self._runs.popitem()[1].retire()

    def sweep(self) -> None:
        """Stop the runs not read for RUN_IDLE_S."""
        with self._lock:
            idle = time.monotonic() - RUN_IDLE_S
            for key in [k for k, r in self._runs.items() if r.used < idle]:
                self.drop(key)

    def __len__(self) -> int:
        return len(self._runs)


RUNS = Runs()
"""The process's kept runs."""
