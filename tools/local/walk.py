"""The Python walk behind file search: which files are searched and what matches.

Standard library only and Python 3.8 syntax (no `removesuffix`, `typing` generics): the
local search (`talaria.tools.local.search`) uses it when ripgrep is absent or rejects a
pattern, and the environment helper ships its source to a container or an SSH host, so
search_files follows the same rules (see that module's docstring) wherever the files live.
Matches are `(relative path, line number or None, line text or None)`.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from fnmatch import fnmatchcase
from re import Pattern
from typing import TYPE_CHECKING

SKIP_DIRS = ("node_modules", "__pycache__")
MAX_MATCHES = 10_000
MAX_LINE_CHARS = 2_000
MAX_FILE_BYTES = 10 * 1024 * 1024
if TYPE_CHECKING:  # evaluated only by type checkers: Python 3.8 has no tuple[...]
    Match = tuple[str, int | None, str | None]


def expand_braces(glob: str) -> list[str]:
    """`*.{ts,tsx}` -> [`*.ts`, `*.tsx`] (one level per brace pair, nested pairs expand too)."""
    m = re.search(r"\{([^{}]*)\}", glob)
    if not m:
        return [glob]
    out: list[str] = []
    for alt in m.group(1).split(","):
        out += expand_braces(glob[: m.start()] + alt + glob[m.end() :])
    return out


def hidden(rel: str) -> bool:
    """Whether a path relative to the search root is in or of a hidden name (what the walk
    skips; rg too, but for the files a glob it is given matches)."""
    return rel.startswith(".") or "/." in rel


def glob_ok(rel: str, globs: list[str]) -> bool:
    """Whether relative path `rel` matches one of `globs` (name, or path when it has a `/`)."""
    name = rel.rsplit("/", 1)[-1]
    for g in globs:
        if "/" in g:  # fnmatch's * crosses "/", so "**/" may also stand for no directory
            g = g[2:] if g.startswith("./") else g
            if fnmatchcase(rel, g) or fnmatchcase(rel, g.replace("**/", "")):
                return True
        elif fnmatchcase(name, g):
            return True
    return False


def _walk(root: str) -> Iterator[tuple[str, str]]:
    """(relative path, full path) of searchable files, in rg's `--sort path` order."""
    if not os.path.isdir(root):
        yield os.path.basename(root), root
        return

    def visit(d: str, prefix: str) -> Iterator[tuple[str, str]]:
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            return
        for e in entries:
            if e.name.startswith(".") or e.is_symlink():
                continue
            if e.is_dir(follow_symlinks=False):
                if e.name not in SKIP_DIRS:
                    yield from visit(e.path, f"{prefix}{e.name}/")
            elif e.is_file(follow_symlinks=False):
                yield prefix + e.name, e.path

    yield from visit(root, "")


def py_files(
    root: str, names: list[str], globs: list[str] | None, deadline: float,
    limit: int = MAX_MATCHES,
) -> list[Match]:
    out: list[Match] = []
    for rel, _ in _walk(root):
        if time.monotonic() > deadline:
            raise TimeoutError
        if glob_ok(rel, names) and (globs is None or glob_ok(rel, globs)):
            out.append((rel, None, None))
            if len(out) >= limit:
                break
    return out


def prefilter(regex: Pattern) -> Pattern | None:
    """A whole-file regex that matches whenever some line matches, to skip files fast.
    None for patterns where line and file context differ (anchors, look-behind)."""
    if any(tok in regex.pattern for tok in ("\\A", "\\Z", "(?<")):
        return None
    return re.compile(regex.pattern, regex.flags | re.MULTILINE)


def py_content(
    root: str, regex: Pattern, globs: list[str] | None, deadline: float,
    limit: int = MAX_MATCHES,
) -> list[Match]:
    out: list[Match] = []
    quick = prefilter(regex)
    for rel, full in _walk(root):
        if time.monotonic() > deadline:
            raise TimeoutError
        if globs is not None and not glob_ok(rel, globs):
            continue
        try:
            if os.path.getsize(full) > MAX_FILE_BYTES:
                continue
            with open(full, "rb") as f:
                data = f.read()
        except OSError:
            continue
        if b"\0" in data:
            continue
        text = data.decode("utf-8-sig", "replace")
        if quick is not None and not quick.search(text.replace("\r\n", "\n")):
            continue
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        for number, line in enumerate(lines, 1):
            line = line[:-1] if line.endswith("\r") else line
            if regex.search(line):
                out.append((rel, number, line[:MAX_LINE_CHARS]))
                if len(out) >= limit:
                    return out
    return out


def changed(root: str, since: float, skip: list[str]) -> list[str]:
    """Files under `root` modified after `since` (epoch seconds), relative; directories
    named in `skip` are not entered."""
    out: list[str] = []
    for base, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in skip]
        for name in names:
            path = os.path.join(base, name)
            try:
                if os.lstat(path).st_mtime > since:
                    out.append(os.path.relpath(path, root))
            except OSError:
                pass
    return sorted(out)
