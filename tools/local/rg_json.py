"""rg's `--json` records read into matches (`Lines`) and its `--files` lines into paths
(`Names`), for the runs of `talaria.tools.local.ripgrep`: whole files at a time (a file's
matches count once its `end` record says it is neither binary nor too big), a `match`
record kept as it is until a page shows it, then its line read as it is (or decoded alone),
the path of a `begin` record without a JSON parse when nothing in it is escaped."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]

from talaria.tools.local.walk import MAX_FILE_BYTES, MAX_LINE_CHARS, glob_ok, hidden
from talaria.tools.workspace import SearchMatch


def relative(root: str, is_dir: bool) -> Callable[[str], str]:
    """Path as rg prints it (the root joined with the relative path) → relative path."""
    if not is_dir:
        name = os.path.basename(root)
        return lambda path: name
    cut = len(os.path.join(root, ""))
    return lambda path: path[cut:].replace(os.sep, "/")


def _text(field: dict[str, str]) -> str:
    if "text" in field:
        return field["text"]
    return os.fsdecode(base64.b64decode(field["bytes"]))


_LINES = b'"lines":{"text":"'
_LINES_TEXT = _LINES.decode()
_LINES_END = b'"},"line_number":'
_NEWLINE = b"\\n"
_RETURN = b"\\r"


def _match(raw: bytes, path: str) -> SearchMatch:
    """A `match` record of the file at `path` (relative): its line's text read as it is when
    nothing in it is escaped but its line end (most lines: no JSON decoding), else decoded
    alone, else the whole record parsed (a line that is not UTF-8 comes as base64 bytes).
    (The path before the line is JSON and the text's quotes are escaped, so the keys' text
    found is the keys.)"""
    at = raw.find(_LINES)
    end = raw.find(_LINES_END, at)
    if at < 0 or end < 0:
        data = json.loads(raw)["data"]
        number = data["line_number"]
        text = _text(data["lines"]).removesuffix("\n").removesuffix("\r")
    else:
        at += len(_LINES)
        inner = raw[at:end].removesuffix(_NEWLINE).removesuffix(_RETURN)
        if b"\\" in inner:  # (a path's characters may take several bytes: found anew)
            record = raw.decode("utf-8", "surrogateescape")
            text, _ = scanstring(record, record.find(_LINES_TEXT) + len(_LINES_TEXT))
            text = text.removesuffix("\n").removesuffix("\r")
        else:
            text = inner.decode("utf-8", "surrogateescape")
        end += len(_LINES_END)
        number = int(raw[end:raw.find(b",", end)])
    return SearchMatch(path, number, text[:MAX_LINE_CHARS])


_MATCH = b'{"type":"match"'
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

    def __init__(self, rel: Callable[[str], str], globs: list[str] | None, most: int,
                 skip_hidden: bool = False) -> None:
        self.rel, self.globs, self.most = rel, globs, most
        self.skip_hidden = skip_hidden
        """Drop hidden paths: rg searches those a glob it was given matches."""
        self.found: list[SearchMatch | Unread] = []
        self.pending: list[SearchMatch | Unread] = []
        """The current file's matches: kept once its `end` record says it is not binary."""
        self.wanted = True
        self.path = ""
        """The current file's, relative (from its `begin` record)."""

    def feed(self, buf: bytes, cap: int) -> tuple[int, bool]:
        """Read the whole lines of `buf` (`take`, a match's inline: most lines are): where the
        lines read end, and True when they end a file that brought the matches to `cap`."""
        at, find, starts = 0, buf.find, buf.startswith
        found, pending, most = self.found, self.pending, self.most
        while (end := find(b"\n", at)) >= 0:
            if starts(_MATCH, at):
                if self.wanted and len(found) + len(pending) < most:
                    pending.append((self.path, buf[at:end]))
            elif not self.take(buf[at:end], cap):
                return end + 1, True
            at = end + 1
        return at, False

    def take(self, raw: bytes, cap: int) -> bool:
        """Read one record; False at the end of a file once `cap` matches are found."""
        if raw.startswith(_MATCH):
            if self.wanted and len(self.found) + len(self.pending) < self.most:
                self.pending.append((self.path, raw))
        elif raw.startswith(b'{"type":"begin"'):
            self.path = path = self.rel(_begun(raw))
            self.wanted = not (self.skip_hidden and hidden(path)) and (
                self.globs is None or glob_ok(path, self.globs))
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
        self.found: list[SearchMatch | Unread] = []

    def feed(self, buf: bytes, cap: int) -> tuple[int, bool]:
        """Read the whole lines of `buf`: where the lines read end, and True when `cap` paths
        are found."""
        at, find, take = 0, buf.find, self.take
        while (end := find(b"\n", at)) >= 0:
            if not take(buf[at:end], cap):
                return end + 1, True
            at = end + 1
        return at, False

    def take(self, raw: bytes, cap: int) -> bool:
        path = self.rel(os.fsdecode(raw))
        if self.keep(path) and len(self.found) < self.most:
            self.found.append(SearchMatch(path))
        return len(self.found) < cap


Unread = tuple[str, bytes]
"""A match as rg wrote it (its file's path, relative, and the record), decoded when a page
shows it (`Found.page`): a search for the third page has no use for the lines of the first
two, nor a page for the rest of the file it ends in."""


@dataclass(frozen=True, slots=True)
class Found:
    """What a run has found so far, in the order rg found it."""

    matches: list[SearchMatch | Unread]
    complete: bool
    """rg is done: these are all the matches (else there are more than were read)."""
    refused: bool = False
    """rg rejected the pattern (the Python walk runs it)."""

    def page(self, offset: int = 0, limit: int | None = None) -> list[SearchMatch]:
        """The matches from `offset` (`limit` of them, or all), decoded."""
        end = None if limit is None else offset + limit
        return [m if isinstance(m, SearchMatch) else _match(m[1], m[0])
                for m in self.matches[offset:end]]
