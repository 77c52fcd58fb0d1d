"""rg's `--json` records read into matches (`Lines`) and its `--files` lines into paths
(`Names`), for the runs of `talaria.tools.local.ripgrep`: whole files at a time (a file's
matches count once its `end` record says it is neither binary nor too big), the line of a
`match` record decoded alone, the path of a `begin` record without a JSON parse when
nothing in it is escaped."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]

from talaria.tools.local.walk import MAX_FILE_BYTES, MAX_LINE_CHARS, glob_ok
from talaria.tools.workspace import SearchMatch


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


_LINES = '"lines":{"text":"'
_NUMBER = '"line_number":'


def _match(raw: bytes, path: str) -> SearchMatch:
    """A `match` record of the file at `path` (relative): its line's text decoded alone (the
    path before it is JSON, so the key's text is the key), else the whole record parsed
    (a line that is not UTF-8 comes as base64 bytes)."""
    record = raw.decode("utf-8", "surrogateescape")
    at = record.find(_LINES)
    number_at = record.find(_NUMBER, at)
    if at < 0 or number_at < 0:
        data = json.loads(raw)["data"]
        text, number = _text(data["lines"]), data["line_number"]
    else:
        text, _ = scanstring(record, at + len(_LINES))
        number_at += len(_NUMBER)
        number = int(record[number_at:record.find(",", number_at)])
    text = text.removesuffix("\n").removesuffix("\r")
    return SearchMatch(path, number, text[:MAX_LINE_CHARS])


_BEGIN = b'{"type":"begin","data":{"path":{"text":"'
_BEGIN_END = b'"}}}'


def _begun(begin: bytes) -> str:
    """The path of a `begin` record: read as it is when nothing in it is escaped (most
    paths: no JSON parse a file), else parsed."""
    if begin.startswith(_BEGIN) and begin.endswith(_BEGIN_END):
        inner = begin[len(_BEGIN):-len(_BEGIN_END)]
        if b"\\" not in inner and b'"' not in inner:
            return inner.decode("utf-8", "surrogateescape")
    return _text(json.loads(begin)["data"]["path"])


def _kept(end: bytes) -> bool:
    """Whether a file's matches count, from its `end` record: not if rg stopped at a NUL byte
    (binary) after printing the matches before it, nor if it searched more than
    MAX_FILE_BYTES (rg's `--max-filesize` would stat every file: 8% of a search of a whole
    tree); the Python backend skips both files whole. (The path before them is JSON: a quote
    in it is escaped, so it cannot hold a key's text.)"""
    if b'"binary_offset":null' not in end:
        return False
    at = end.find(b'"bytes_searched":')
    if at < 0:
        return True
    at += len(b'"bytes_searched":')
    return int(end[at:end.find(b",", at)]) <= MAX_FILE_BYTES


class Lines:
    """`rg --json` records → matches, whole files at a time, up to `most`."""

    def __init__(self, rel: Callable[[str], str], globs: list[str] | None, most: int) -> None:
        self.rel, self.globs, self.most = rel, globs, most
        self.found: list[SearchMatch] = []
        self.pending: list[SearchMatch] = []
        """The current file's matches: kept once its `end` record says it is not binary."""
        self.wanted = True
        self.path = ""
        """The current file's, relative (from its `begin` record)."""

    def take(self, raw: bytes, cap: int) -> bool:
        """Read one record; False at the end of a file once `cap` matches are found."""
        if raw.startswith(b'{"type":"match"'):
            if self.wanted and len(self.found) + len(self.pending) < self.most:
                self.pending.append(_match(raw, self.path))
        elif raw.startswith(b'{"type":"begin"'):
            self.path = self.rel(_begun(raw))
            if self.globs is not None:
                self.wanted = glob_ok(self.path, self.globs)
        elif raw.startswith(b'{"type":"end"'):
            if self.pending and _kept(raw):
                self.found.extend(self.pending)
            self.pending.clear()
            return len(self.found) < cap
        return True


class Names:
    """`rg --files` lines → the paths `keep` accepts, up to `most`."""

    def __init__(self, rel: Callable[[str], str], keep: Callable[[str], bool], most: int) -> None:
        self.rel, self.keep, self.most = rel, keep, most
        self.found: list[SearchMatch] = []

    def take(self, raw: bytes, cap: int) -> bool:
        path = self.rel(os.fsdecode(raw))
        if self.keep(path) and len(self.found) < self.most:
            self.found.append(SearchMatch(path))
        return len(self.found) < cap


@dataclass(frozen=True, slots=True)
class Found:
    """What a run has found so far, in the order rg found it."""

    matches: list[SearchMatch]
    complete: bool
    """rg is done: these are all the matches (else there are more than were read)."""
    refused: bool = False
    """rg rejected the pattern (the Python walk runs it)."""
