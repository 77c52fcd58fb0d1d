"""File search on the local disk: ripgrep when it is on PATH, else a Python walk, same results.

Rules both backends follow (a test runs both on one fixture tree and compares):
- Hidden files and directories (so `.git`), `node_modules/` and `__pycache__/` directories and
  symlinks found while walking are skipped; the search root itself is always searched.
- Ignore files (.gitignore, .ignore) are NOT honoured: rg runs with `--no-ignore`, because a
  Python copy of gitignore semantics would drift from rg's and the two backends would disagree.
- Content: Python `re` syntax, one line at a time; lines split on `\\n` with a trailing `\\r`
  dropped (`$` matches before CRLF). Files with a NUL byte anywhere (binary) or larger than
  MAX_FILE_BYTES are skipped. rg does the work when it accepts the pattern; patterns it rejects
  (look-around, backreferences) run in Python.
- Files: a glob on the file name, or on the relative path when it has a `/`; `{a,b}`
  alternatives; a pattern without glob characters matches names containing it.
- Order: by path components, then line number, so paging is stable. A search stops once it
  has the matches a page asks for and one more (`search_cap`): a common pattern on a big tree
  costs what its first page costs, and the total is then a lower bound that says so
  (`SearchPage.total_exact`). Only a search that ends before that counts every match.
- ripgrep gives the page `rg --sort path` would; over a big tree two of them search its two
  parts side by side (`talaria.tools.local.ripgrep`). Its binary rule (it stops at a NUL
  byte, after printing the matches before it) is made the Python backend's by dropping a
  file's matches when its `end` record names a binary offset.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import anyio

from talaria.tools.local import ripgrep
from talaria.tools.local.walk import (
    MAX_FILE_BYTES,
    SKIP_DIRS,
    expand_braces,
    glob_ok,
    py_content,
    py_files,
)
from talaria.tools.workspace import SearchMatch, WorkspaceError

SEARCH_TIMEOUT_S = 60.0
_GLOB_CHARS = frozenset("*?[{")


def ripgrep_path() -> str | None:
    """The `rg` executable, or None to use the Python backend."""
    return shutil.which("rg")


async def search(
    pattern: str, *, root: Path, target: str = "content", file_glob: str | None = None,
    cap: int = 51,
) -> list[SearchMatch]:
    """The first `cap` matches under `root` (a directory or one file), in order."""
    if target not in ("content", "files"):
        raise ValueError(f"target must be 'content' or 'files', not {target!r}")
    root_s = os.path.normpath(root)
    if not os.path.exists(root_s):
        raise FileNotFoundError(f"No such file or directory: {root}")
    found = await _search(pattern, root_s, target, file_glob, cap)
    if not os.path.isdir(root_s):  # paths are relative to the root: a file root is "."
        found = [SearchMatch(".", m.line, m.text) for m in found]
    return found


async def _search(
    pattern: str, root_s: str, target: str, file_glob: str | None, cap: int
) -> list[SearchMatch]:
    globs = expand_braces(file_glob) if file_glob else None
    rg = ripgrep_path()
    deadline = time.monotonic() + SEARCH_TIMEOUT_S  # the Python walk checks it between files
    try:
        with anyio.fail_after(SEARCH_TIMEOUT_S):
            if target == "files":
                names = expand_braces(pattern if _GLOB_CHARS & set(pattern) else f"*{pattern}*")
                if rg:
                    return await _rg_files(rg, root_s, names, globs, cap)
                return _matches(await anyio.to_thread.run_sync(
                    py_files, root_s, names, globs, deadline, cap, abandon_on_cancel=True
                ))
            try:
                regex = re.compile(pattern)
            except re.error as exc:
                raise WorkspaceError(f"invalid regex {pattern!r}: {exc}") from None
            if rg:
                found = await _rg_content(rg, root_s, pattern, globs, cap)
                if found is not None:
                    return found
            return _matches(await anyio.to_thread.run_sync(
                py_content, root_s, regex, globs, deadline, cap, abandon_on_cancel=True
            ))
    except TimeoutError:
        raise WorkspaceError(
            f"search timed out after {SEARCH_TIMEOUT_S:.0f} s; narrow the path or file_glob"
        ) from None


def _matches(found: list[tuple[str, int | None, str | None]]) -> list[SearchMatch]:
    return [SearchMatch(*m) for m in found]


def _rg_base(rg: str, globs: list[str] | None) -> list[str]:
    """rg's walk as the Python walk's. Globs on the file name prune what rg reads (glob_ok
    still decides: both backends agree on every glob); globs on the path, or negated ones,
    mean something else to rg and are left out. A glob rg is given outranks its hidden-file
    rule and the globs before it (the last match wins: `*.js` would list `.eslintrc.js`, and
    `*` the files in `node_modules/`), so the skipped names come after it."""
    prune = bool(globs) and all("/" not in g and not g.startswith("!") for g in globs or ())
    argv = [rg, "--no-config", "--no-ignore"]
    for g in globs or () if prune else ():
        argv += ["-g", g]
    for d in SKIP_DIRS:
        argv += ["-g", f"!{d}/"]
    return [*argv, "-g", "!.*"] if prune else argv


async def _rg(argv: list[str], root: str, whole: ripgrep.Lines | ripgrep.Names,
              tail: ripgrep.Lines | ripgrep.Names | None = None) -> tuple[list[SearchMatch], bool]:
    """`ripgrep.run` on a worker thread (an asyncio subprocess costs a child-watcher thread
    and a loop wake-up per chunk, more than a page); rg is killed if the search is cancelled.
    `tail` reads the second rg of a tree cut in two; None: one rg, never cut."""
    parts = ripgrep.split(root, SKIP_DIRS) if tail is not None and os.path.isdir(root) else None
    if parts is None:
        cwd = root if os.path.isdir(root) else os.path.dirname(root) or "."
        plan = ripgrep.Plan([*argv, "--sort", "path", "--", root], None, cwd)
    else:
        argv = [*argv, "--sort", "path", "--line-buffered"]
        globs, dirs = parts
        mark = os.path.join(tempfile.gettempdir(), f".talaria-{secrets.token_hex(8)}")
        paths = [os.path.join(root, d) for d in dirs]
        plan = ripgrep.Plan([*argv, *_globs(globs), "--", root, mark, *paths],
                            [*argv, "--", *paths] if paths else None, root, mark, tuple(dirs))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        return await anyio.to_thread.run_sync(ripgrep.run, plan, whole, tail, procs,
                                              abandon_on_cancel=True)
    finally:
        for proc in procs:  # cancelled: the thread is abandoned, rg must not run on
            with contextlib.suppress(ProcessLookupError):
                proc.kill()


def _globs(globs: list[str]) -> list[str]:
    return [arg for g in globs for arg in ("-g", g)]


async def _rg_files(
    rg: str, root: str, names: list[str], globs: list[str] | None, cap: int
) -> list[SearchMatch]:
    rel = ripgrep.relative(root)

    def keep(path: str) -> bool:
        return glob_ok(path, names) and (globs is None or glob_ok(path, globs))

    argv = [*_rg_base(rg, names), "--files"]
    # Not cut: a listing prints a line a file, and `--line-buffered` (for the mark) costs a
    # page of names 20-50% (a write a line); a whole listing is ~3x quicker than a content search.
    found, _ = await _rg(argv, root, ripgrep.Names(rel, keep, cap))
    return found


async def _rg_content(
    rg: str, root: str, pattern: str, globs: list[str] | None, cap: int
) -> list[SearchMatch] | None:
    """Matches found by rg, or None when rg rejects the pattern (Python takes over)."""
    argv = [*_rg_base(rg, globs), "--json", "--crlf", "--no-mmap",
            "--max-filesize", str(MAX_FILE_BYTES), "-e", pattern]
    rel = ripgrep.relative(root)
    found, refused = await _rg(argv, root, ripgrep.Lines(rel, globs, cap),
                               ripgrep.Lines(rel, globs, cap))
    return None if refused else found
