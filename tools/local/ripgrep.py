"""What ripgrep prints, read into matches (`talaria.tools.local.ordered` runs the processes).

A process searches one part of a tree or several (`talaria.tools.local.plan`); each line is
put in the part of its file (`part_of`: the part whose entry the path starts with), at most
`cap` matches a part, in the order rg printed them, which is the part's path order.

File size: `--max-filesize` makes rg stat every file it walks (+11-15% CPU over a tree of
small files); the `end` record's `bytes_searched` (the whole file, for a text file with
matches) drops a large file's matches instead, and a large binary file is given up at its
first NUL as any other. Only a large text file costs its reading.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable

from talaria.tools.local.walk import MAX_FILE_BYTES, MAX_LINE_CHARS, glob_ok
from talaria.tools.workspace import SearchMatch


def relative(root: str) -> Callable[[str], str]:
    """Path as rg prints it (the root joined with the relative path) → relative path."""
    if not os.path.isdir(root):
        name = os.path.basename(root)
        return lambda path: name
    cut = len(os.path.join(root, ""))
    return lambda path: path[cut:].replace(os.sep, "/")


def part_of(entries: dict[str, int]) -> Callable[[str], int] | int:
    """Path as rg prints it → the part of the entry (file or directory) it is, or is under;
    the part itself when there is one."""
    if len(set(entries.values())) == 1:
        return next(iter(entries.values()))

    def find(path: str) -> int:
        at = path
        while at not in entries:
            parent = os.path.dirname(at)
            if parent == at:
                raise ValueError(f"rg printed a path outside its parts: {path!r}")
            at = parent
        return entries[at]

    return find


class Reader:
    """One rg process's output → matches by part (`outs`), at most `cap` a part."""

    def __init__(self, cap: int, part: Callable[[str], int] | int) -> None:
        self.cap = cap
        self.part = part if callable(part) else None
        self.outs: dict[int, list[SearchMatch]] = {} if callable(part) else {part: []}
        self.only = None if callable(part) else self.outs[part]

    def take(self, raw: bytes) -> None:
        raise NotImplementedError

    def _out(self, printed: str) -> list[SearchMatch]:
        if self.part is None:
            assert self.only is not None
            return self.only
        return self.outs.setdefault(self.part(printed), [])


class Names(Reader):
    """`rg --files` lines: the paths `keep` accepts."""

    def __init__(self, cap: int, part: Callable[[str], int] | int, rel: Callable[[str], str],
                 keep: Callable[[str], bool]) -> None:
        super().__init__(cap, part)
        self.rel, self.keep = rel, keep

    def take(self, raw: bytes) -> None:
        printed = os.fsdecode(raw)
        out = self._out(printed)
        if len(out) < self.cap:
            path = self.rel(printed)
            if self.keep(path):
                out.append(SearchMatch(path))


class Lines(Reader):
    """`rg --json` records: a file's matches count once its `end` says it is neither binary
    nor over MAX_FILE_BYTES (rg stops at a NUL byte after printing the matches before it)."""

    def __init__(self, cap: int, part: Callable[[str], int] | int, rel: Callable[[str], str],
                 globs: list[str] | None) -> None:
        super().__init__(cap, part)
        self.rel, self.globs = rel, globs
        self.pending: list[SearchMatch] = []
        self.into: list[SearchMatch] = self.only if self.only is not None else []
        """The part's matches the file being read adds to."""
        self.wanted = True

    def take(self, raw: bytes) -> None:
        if raw.startswith(b'{"type":"match"'):
            if self.wanted and len(self.into) + len(self.pending) < self.cap:
                data = json.loads(raw)["data"]
                text = _text(data["lines"]).removesuffix("\n").removesuffix("\r")
                path = self.rel(_text(data["path"]))
                self.pending.append(SearchMatch(path, data["line_number"], text[:MAX_LINE_CHARS]))
        elif raw.startswith(b'{"type":"begin"') and (self.part or self.globs):
            printed = _text(json.loads(raw)["data"]["path"])  # one part, any file: no need
            self.into = self._out(printed)
            self.wanted = self.globs is None or glob_ok(self.rel(printed), self.globs)
        elif raw.startswith(b'{"type":"end"') and self.pending:
            data = json.loads(raw)["data"]
            if data.get("binary_offset") is None and data["stats"]["bytes_searched"] <= MAX_FILE_BYTES:
                self.into.extend(self.pending)
            self.pending.clear()


def _text(field: dict[str, str]) -> str:
    if "text" in field:
        return field["text"]
    return os.fsdecode(base64.b64decode(field["bytes"]))
