"""What ripgrep prints, read into matches: the readers of one rg process's output
(`talaria.tools.local.ordered` runs the processes).

A process searches several parts of a tree (`talaria.tools.local.plan`), each followed by a
sentinel: a hidden file outside the tree that only the search's own extra pattern (a random
token in its name and text) matches, so its record says "the part before me is done"
(`Reader.take` returns True).

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


class Reader:
    """One rg process's output → the matches of the part it is in, at most `cap`; `take`
    says when a sentinel ends the part (the caller then collects `out` and clears it)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.out: list[SearchMatch] = []

    def take(self, raw: bytes) -> bool:
        raise NotImplementedError


class Names(Reader):
    """`rg --files` lines: the paths `keep` accepts."""

    def __init__(self, cap: int, rel: Callable[[str], str], keep: Callable[[str], bool],
                 sentinel: str | None) -> None:
        super().__init__(cap)
        self.rel, self.keep = rel, keep
        self.sentinel = os.fsencode(sentinel) if sentinel else None

    def take(self, raw: bytes) -> bool:
        if raw == self.sentinel:
            return True
        path = self.rel(os.fsdecode(raw))
        if len(self.out) < self.cap and self.keep(path):
            self.out.append(SearchMatch(path))
        return False


class Lines(Reader):
    """`rg --json` records: a file's matches count once its `end` says it is neither binary
    nor over MAX_FILE_BYTES (rg stops at a NUL byte after printing the matches before it).
    The sentinel's records carry `token` (in its path), which no other line can."""

    def __init__(self, cap: int, rel: Callable[[str], str], globs: list[str] | None,
                 token: bytes | None) -> None:
        super().__init__(cap)
        self.rel, self.globs, self.token = rel, globs, token
        self.pending: list[SearchMatch] = []
        self.wanted = True

    def take(self, raw: bytes) -> bool:
        if raw.startswith(b'{"type":"match"'):
            if self.wanted and len(self.out) + len(self.pending) < self.cap:
                data = json.loads(raw)["data"]
                text = _text(data["lines"]).removesuffix("\n").removesuffix("\r")
                path = self.rel(_text(data["path"]))
                self.pending.append(SearchMatch(path, data["line_number"], text[:MAX_LINE_CHARS]))
        elif raw.startswith(b'{"type":"begin"'):
            if self.token is not None and self.token in raw:
                self.wanted = False
            else:
                path = self.rel(_text(json.loads(raw)["data"]["path"]))
                self.wanted = self.globs is None or glob_ok(path, self.globs)
        elif raw.startswith(b'{"type":"end"'):
            if self.pending:
                data = json.loads(raw)["data"]
                if (data.get("binary_offset") is None
                        and data["stats"]["bytes_searched"] <= MAX_FILE_BYTES):
                    self.out.extend(self.pending)
                self.pending.clear()
            return self.token is not None and self.token in raw
        return False


def _text(field: dict[str, str]) -> str:
    if "text" in field:
        return field["text"]
    return os.fsdecode(base64.b64decode(field["bytes"]))
