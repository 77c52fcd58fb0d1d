"""ripgrep behind the local search: the page `rg --sort path` stopped at `cap` would give,
with two rg processes over a big tree.

`--sort path` keeps rg on one thread (over a whole tree ~1.45x slower than its parallel walk
on two cores). So a directory is cut in two at its last searched subdirectory (`split`): one
`rg --sort path` searches the head, everything before the cut, and reads the page there; if
it is still going after TAIL_AFTER_S, a second one searches the tail beside it (a page found
sooner costs one process). The tail's matches come after the head's, so they are read only
once the head is done short of its page: the pages are those of one `rg --sort path`, and a
search over the whole tree takes the longer of the two parts. Each part is the whole tree
less the other's names, as anchored globs (`!/name`), so both walk it by the same rules.
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

TAIL_AFTER_S = 0.015
"""When the tail's rg starts beside the head's: a page of a common pattern takes ~5-10 ms,
and a second process then would compete with the first for its core."""
MAX_SPLIT_DEPTH = 3
"""Levels of single directories entered to find a cut."""
MAX_SPLIT_NAMES = 500
"""Names at a level past which the tree is searched whole (a glob per name)."""
_GLOB_SPECIAL = frozenset("*?[]{}\\!,")
_CHUNK = 1 << 16


def relative(root: str) -> Callable[[str], str]:
    """Path as rg prints it (the root joined with the relative path) → relative path."""
    if not os.path.isdir(root):
        name = os.path.basename(root)
        return lambda path: name
    cut = len(os.path.join(root, ""))
    return lambda path: path[cut:].replace(os.sep, "/")


def path_key(rel: str) -> list[bytes]:
    """`--sort path` order: each directory's names sorted as bytes, so by component."""
    return os.fsencode(rel).split(b"/")


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
            path = _text(json.loads(raw)["data"]["path"])
            self.wanted = self.globs is None or glob_ok(self.rel(path), self.globs)
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
    """A directory cut in two at a name, for two rg processes: (globs that leave out the tail,
    globs that leave out the head), anchored at `root` (rg's working directory). The head is
    every path before the cut in `--sort path` order, the tail every path after it. The cut is
    at the last searched directory of the first level with two or more (a level with one is
    entered). None when there is none, when the root is reached through a symlink (rg matches
    anchored globs against its real working directory), or for names a glob cannot spell."""
    if os.path.realpath(root) != root:
        return None
    base = ""
    before: list[str] = []
    """Names before the path to the cut's level, at each level above it: in the head."""
    after: list[str] = []
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
        if len(dirs) == 1:
            at = dirs[0]
            before += [base + n for n, _ in entries[:at]]
            after += [base + n for n, _ in entries[at + 1:]]
            base += entries[at][0] + "/"
            continue
        cut = dirs[-1]
        head = before + [base + n for n, _ in entries[:cut]]
        tail = [base + n for n, _ in entries[cut:]] + after
        return [f"!/{p}" for p in tail], [f"!/{p}" for p in head]
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
    """One rg process: its stdout read in chunks (so reads can wait on several), stderr to a
    file."""

    def __init__(self, argv: list[str], procs: list[subprocess.Popen[bytes]], cwd: str,
                 take: Callable[[bytes], bool]) -> None:
        self.take = take
        self.err = tempfile.TemporaryFile()  # noqa: SIM115 - closed with the process
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, cwd=cwd,
                                         stdout=subprocess.PIPE, stderr=self.err)
        except BaseException:
            self.err.close()
            raise
        procs.append(self.proc)  # killed by the caller if the search is cancelled
        assert self.proc.stdout is not None
        self.fd = self.proc.stdout.fileno()
        self.rest = b""
        self.ended = False
        """rg ended, and `take` had every line."""

    def read(self) -> bool:
        """Give `take` the lines of one chunk; False once it has enough (ended stays False)."""
        chunk = os.read(self.fd, _CHUNK)
        if not chunk:
            self.ended = True
            return True
        lines = (self.rest + chunk).split(b"\n")
        self.rest = lines.pop()
        return all(self.take(line) for line in lines)

    def refused(self) -> bool:
        """Whether rg rejected the pattern (Python then runs it)."""
        self.proc.wait()
        self.err.seek(0)
        return self.proc.returncode == 2 and b"regex" in self.err.read(4096)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait()
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        self.err.close()


@dataclass(slots=True)
class Plan:
    """The rg command lines of one search, `--sort path` and the path last."""

    head: list[str]
    """The whole tree, or its head when there is a tail."""
    tail: list[str] | None
    """The tail, or None."""
    cwd: str
    """rg's working directory, the root its anchored globs are relative to."""


def run(plan: Plan, head: Lines | Names, tail: Lines | Names,
        procs: list[subprocess.Popen[bytes]]) -> tuple[list[SearchMatch], bool]:
    running: dict[int, _Rg] = {}
    poll = select.poll()

    def start(argv: list[str], reader: Lines | Names) -> _Rg:
        rg = _Rg(argv, procs, plan.cwd, reader.take)
        running[rg.fd] = rg
        poll.register(rg.fd, select.POLLIN)
        return rg

    head_rg = start(plan.head, head)
    tail_rg: _Rg | None = None
    tail_at = time.monotonic() + TAIL_AFTER_S
    try:
        while True:
            if head_rg.ended:
                if not head.found and head_rg.refused():
                    return [], True
                if plan.tail is None:
                    return head.found, False
                if tail_rg is not None and (tail_rg.ended or len(tail.found) >= tail.cap):
                    return head.found + tail.found[:head.cap - len(head.found)], False
            if tail_rg is None and plan.tail is not None and (
                    head_rg.ended or time.monotonic() >= tail_at):
                tail_rg = start(plan.tail, tail)
            wait = (None if tail_rg is not None or plan.tail is None
                    else max(0, int((tail_at - time.monotonic()) * 1000)))
            for fd, _ in poll.poll(wait):
                rg = running[fd]
                more = rg.read()
                if not more and rg is head_rg:
                    return head.found, False
                if rg.ended or not more:
                    poll.unregister(fd)
    finally:
        for rg in running.values():
            rg.close()
