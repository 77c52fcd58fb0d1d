"""ripgrep behind the local search: the page `rg --sort path` stopped at `cap` would give,
with a second rg over the tail of a big tree.

`--sort path` keeps rg on one thread (over a whole tree ~1.45x slower than its parallel walk
on two cores). So a directory is cut at its last searched subdirectory (`split`), and one
`rg --sort path` is given the tree as the head (the tree less the tail, by anchored `!/name`
globs), then a path that does not exist (the mark: its error on stderr says the head is
done, `--line-buffered` having put the head's lines in the pipe first), then the tail's
directories. A page of a common pattern is found by it alone. If it is still in the head
after TAIL_AFTER_S, a second `rg --sort path` searches the tail beside it; once the first is
past the mark it is stopped, and the tail's matches follow the head's. The pages are those of
one `rg --sort path`; a search over the whole tree takes about the longer of the two parts.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from talaria.tools.local.walk import MAX_LINE_CHARS, glob_ok
from talaria.tools.workspace import SearchMatch

TAIL_AFTER_S = 0.03
"""When the tail's rg starts beside the first: a page of a common pattern takes ~5-10 ms, a
search of a small tree ~30 ms, and a second process sooner competes with the first for a
core and pays its own start (measured: 15 ms cost those searches 10-25%)."""
MAX_SPLIT_DEPTH = 3
"""Levels of single directories entered to find a cut."""
MAX_SPLIT_NAMES = 500
"""Names at a level past which the tree is searched whole (a glob per name)."""
MAX_ERRORS = 4096
"""Bytes of rg's own error messages kept, to tell a pattern it refused."""
_GLOB_SPECIAL = frozenset("*?[]{}\\!,")
_CHUNK = 1 << 16


def relative(root: str) -> Callable[[str], str]:
    """Path as rg prints it (the root joined with the relative path) → relative path."""
    if not os.path.isdir(root):
        name = os.path.basename(root)
        return lambda path: name
    cut = len(os.path.join(root, ""))
    return lambda path: path[cut:].replace(os.sep, "/")


def _text(field: dict[str, str]) -> str:
    if "text" in field:
        return field["text"]
    return os.fsdecode(base64.b64decode(field["bytes"]))


def _match(raw: bytes, rel: Callable[[str], str]) -> SearchMatch:
    data = json.loads(raw)["data"]
    text = _text(data["lines"]).removesuffix("\n").removesuffix("\r")
    return SearchMatch(rel(_text(data["path"])), data["line_number"], text[:MAX_LINE_CHARS])


def _kept(end: bytes) -> bool:
    """Whether a file's matches count, from its `end` record: rg stops at a NUL byte (binary)
    after printing the matches before it, and the Python backend drops the whole file."""
    return json.loads(end)["data"].get("binary_offset") is None


class Lines:
    """`rg --json --sort path` records → the first `cap` matches, in order."""

    def __init__(self, rel: Callable[[str], str], globs: list[str] | None, cap: int) -> None:
        self.rel, self.globs, self.cap = rel, globs, cap
        self.found: list[SearchMatch] = []
        self.pending: list[SearchMatch] = []
        """The current file's matches: kept once its `end` record says it is not binary."""
        self.wanted = True

    def take(self, raw: bytes) -> bool:
        """Read one record; False once the page is full."""
        if raw.startswith(b'{"type":"match"'):
            if self.wanted and len(self.found) + len(self.pending) < self.cap:
                self.pending.append(_match(raw, self.rel))
        elif raw.startswith(b'{"type":"begin"'):
            if self.globs is not None:
                path = _text(json.loads(raw)["data"]["path"])
                self.wanted = glob_ok(self.rel(path), self.globs)
        elif raw.startswith(b'{"type":"end"'):
            if self.pending and _kept(raw):
                self.found.extend(self.pending)
            self.pending.clear()
            return len(self.found) < self.cap
        return True


class Names:
    """`rg --files --sort path` lines → the first `cap` paths `keep` accepts."""

    def __init__(self, rel: Callable[[str], str], keep: Callable[[str], bool], cap: int) -> None:
        self.rel, self.keep, self.cap = rel, keep, cap
        self.found: list[SearchMatch] = []

    def take(self, raw: bytes) -> bool:
        path = self.rel(os.fsdecode(raw))
        if self.keep(path):
            self.found.append(SearchMatch(path))
        return len(self.found) < self.cap


def split(root: str, skip: tuple[str, ...]) -> tuple[list[str], list[str]] | None:
    """A directory cut in two, for two rg processes: (globs that leave out the tail, anchored
    at `root`, rg's working directory; the tail's directories, relative). The head is every
    path before the cut in `--sort path` order, the tail every path from it on; the cut is at
    the last searched directory of the first level with two or more (a level with one is
    entered), and the tail is directories only (a file rg is given is searched whatever its
    globs, binary or not: None then). None too when there is no cut, when the root is reached
    through a symlink (rg anchors globs at its real working directory), or for names a glob
    cannot spell."""
    if os.path.realpath(root) != root:
        return None
    base = ""
    after: list[tuple[str, bool]] = []
    """(path, is a directory) after the path to the cut's level, at each level above it."""
    for _ in range(MAX_SPLIT_DEPTH):
        try:
            entries = sorted(((e.name, e.is_dir(follow_symlinks=False))
                              for e in os.scandir(os.path.join(root, base))),
                             key=lambda e: os.fsencode(e[0]))
        except OSError:
            return None
        if len(entries) > MAX_SPLIT_NAMES or not all(_spelt(n) for n, _ in entries):
            return None
        dirs = [i for i, (n, d) in enumerate(entries)
                if d and not n.startswith(".") and n not in skip]
        if not dirs:
            return None
        at = dirs[-1]
        later = [(base + n, d) for n, d in entries[at + 1:]] + after
        if len(dirs) == 1:
            after = later
            base += entries[at][0] + "/"
            continue
        tail = [(base + entries[at][0], True), *later]
        if any(not d and not p.rsplit("/", 1)[-1].startswith(".") for p, d in tail):
            return None
        searched = [p for p, d in tail if d and p.rsplit("/", 1)[-1] not in skip
                    and not p.rsplit("/", 1)[-1].startswith(".")]
        return [f"!/{p}" for p, _ in tail], searched
    return None


def _spelt(name: str) -> bool:
    """Whether a glob spells `name` as it is: no glob syntax, and UTF-8 (rg's globs are)."""
    if _GLOB_SPECIAL & set(name):
        return False
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _Rg:
    """One rg process: its stdout read in chunks (so reads can wait on several); its stderr
    kept (the first MAX_ERRORS bytes) and watched for `mark`, a path rg was given that does
    not exist, whose error says rg is done with the paths before it."""

    def __init__(self, argv: list[str], procs: list[subprocess.Popen[bytes]], cwd: str,
                 take: Callable[[bytes], bool], mark: str | None = None) -> None:
        self.take = take
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, cwd=cwd,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        procs.append(self.proc)  # killed by the caller if the search is cancelled
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.fd, self.err_fd = self.proc.stdout.fileno(), self.proc.stderr.fileno()
        self.rest = b""
        self.ended = False
        """rg ended, and `take` had every line."""
        self.errors = b""
        self.mark = None if mark is None else os.fsencode(mark)
        self.passed = False
        """rg's error for `mark` came: every line before it has been printed."""

    def read(self) -> bool:
        """Give `take` the lines of one chunk; False once it has enough (ended stays False)."""
        chunk = os.read(self.fd, _CHUNK)
        if not chunk:
            self.ended = True
            return True
        lines = (self.rest + chunk).split(b"\n")
        self.rest = lines.pop()
        return all(self.take(line) for line in lines)

    def read_errors(self) -> bool:
        """Read stderr; True when it ended (rg must not block on a full pipe)."""
        chunk = os.read(self.err_fd, _CHUNK)
        seen = self.errors[-len(self.mark or b""):] + chunk
        if self.mark is not None and self.mark in seen:
            self.passed = True
        if len(self.errors) < MAX_ERRORS:
            self.errors += chunk
        return not chunk

    def refused(self) -> bool:
        """Whether rg rejected the pattern (Python then runs it)."""
        assert self.proc.stderr is not None
        self.proc.wait()
        if not self.proc.stderr.closed:
            self.errors += self.proc.stderr.read(MAX_ERRORS)
        return self.proc.returncode == 2 and b"regex" in self.errors

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdout.close()
        self.proc.stderr.close()


@dataclass(slots=True)
class Plan:
    """The rg command lines of one search (`--sort path`, `--line-buffered`)."""

    whole: list[str]
    """The whole tree: the head, then `mark`, then the tail's directories."""
    tail: list[str] | None
    """The tail's directories, or None (`whole` is one path)."""
    cwd: str
    """rg's working directory, the root its anchored globs are relative to."""
    mark: str | None = None
    tail_dirs: tuple[str, ...] = ()
    """The tail's directories, relative to the root."""


def run(plan: Plan, whole: Lines | Names, tail: Lines | Names | None,
        procs: list[subprocess.Popen[bytes]]) -> tuple[list[SearchMatch], bool]:
    """The first `cap` matches in order and whether rg refused the pattern. `whole` reads one
    rg over the whole tree, as one `rg --sort path` would. If it is still in the head after
    TAIL_AFTER_S, a second rg searches the tail beside it (read by `tail`); once the first is
    past the head (its error for `plan.mark`) it stops, and the tail's matches follow the
    head's. A search whose head ends sooner runs one process; a plan with no tail (or no
    `tail` to read it) runs one rg."""
    if plan.tail is None or tail is None:
        return _one(plan, whole, procs)
    cap = whole.cap
    main = _Rg(plan.whole, procs, plan.cwd, whole.take, plan.mark)
    helper: _Rg | None = None
    poll = select.poll()
    poll.register(main.fd, select.POLLIN)
    poll.register(main.err_fd, select.POLLIN)
    tail_at: float | None = time.monotonic() + TAIL_AFTER_S
    in_head = -1
    """The matches the head holds, once the first rg is past it with the tail's rg going."""
    try:
        while True:
            if main.ended:
                if not whole.found and main.refused():
                    return [], True
                return whole.found, False
            if in_head >= 0 and helper is not None and (
                    helper.ended or len(tail.found) >= cap - in_head):
                return whole.found[:in_head] + tail.found[:cap - in_head], False
            if tail_at is not None and time.monotonic() >= tail_at:
                tail_at = None
                if not main.passed:
                    assert plan.tail is not None
                    helper = _Rg(plan.tail, procs, plan.cwd, tail.take)
                    poll.register(helper.fd, select.POLLIN)
                    poll.register(helper.err_fd, select.POLLIN)
            wait = None if tail_at is None else max(0, int((tail_at - time.monotonic()) * 1000))
            for fd, _ in poll.poll(wait):
                if in_head >= 0 and fd in (main.fd, main.err_fd):
                    continue  # stopped past the head
                if fd == main.fd:
                    if not main.read():  # a page, in path order wherever it is
                        return whole.found, False
                    if main.ended:
                        poll.unregister(fd)
                elif fd == main.err_fd:
                    if main.read_errors():
                        poll.unregister(fd)
                    if main.passed and helper is not None:
                        # its lines are flushed before the error: read them, then it stops
                        while _poll_one(main.fd) and not main.ended:
                            if not main.read():
                                return whole.found, False
                        if main.ended:
                            continue
                        # it may have read into the tail by now: those are the tail's
                        tops = tuple(d + "/" for d in plan.tail_dirs)
                        in_head = sum(1 for m in whole.found
                                      if m.path not in plan.tail_dirs and not m.path.startswith(tops))
                        poll.unregister(main.fd)
                        with contextlib.suppress(KeyError):
                            poll.unregister(main.err_fd)
                        main.close()
                elif helper is not None and fd == helper.fd:
                    if not helper.read() or helper.ended:  # the tail's page waits for the head
                        poll.unregister(fd)
                elif helper is not None and fd == helper.err_fd and helper.read_errors():
                    poll.unregister(fd)
    finally:
        main.close()
        if helper is not None:
            helper.close()


def _one(plan: Plan, whole: Lines | Names, procs: list[subprocess.Popen[bytes]]
         ) -> tuple[list[SearchMatch], bool]:
    """One rg read line by line until `whole` has its page (a buffered pipe: fewer reads
    than `_Rg`'s chunks on a search that ends in a few ms)."""
    with tempfile.TemporaryFile() as err, subprocess.Popen(
            plan.whole, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
            cwd=plan.cwd) as proc:
        procs.append(proc)  # killed by the caller if the search is cancelled
        assert proc.stdout is not None
        for line in proc.stdout:
            if not whole.take(line.removesuffix(b"\n")):
                proc.kill()
                return whole.found, False
        proc.wait()
        err.seek(0)
        refused = proc.returncode == 2 and b"regex" in err.read(MAX_ERRORS)
        return whole.found, not whole.found and refused


def _poll_one(fd: int) -> bool:
    """Whether `fd` has something to read now."""
    p = select.poll()
    p.register(fd, select.POLLIN)
    return bool(p.poll(0))
