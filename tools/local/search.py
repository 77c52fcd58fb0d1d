"""File search on the local disk: ripgrep when it is on PATH, else a Python walk, same results.

Rules both backends follow (a test runs both on one fixture tree and compares):
- Hidden files and directories (so `.git`), `node_modules/` and `__pycache__/` directories and
  symlinks found while walking are skipped; the search root itself is always searched.
- Ignore files (.gitignore, .ignore) are NOT honoured: rg runs with `--no-ignore`, because a
  Python copy of gitignore semantics would drift from rg's and the two backends would disagree.
- Content: Python `re` syntax, one line at a time; lines split on `\\n` with a trailing `\\r`
  dropped (`$` matches before CRLF). Files with a NUL byte anywhere (binary) or larger than
  MAX_FILE_BYTES are skipped (rg searches a big file and its matches are dropped: a stat
  of every file, `--max-filesize`, costs a search of a whole tree 8%). rg does the work
  when it accepts the pattern; patterns it rejects
  (look-around, backreferences) run in Python.
- Files: a glob on the file name, or on the relative path when it has a `/`; `{a,b}`
  alternatives; a pattern without glob characters matches names containing it.
- Order: rg's, the order its parallel walk finds the files in (a file's matches by line);
  the Python walk's by path components, then line number. A page is put in path order before
  it is shown. A search stops once it has the matches a page asks for and one more
  (`search_cap`, whole files): a common pattern on a big tree costs what its first page
  costs, and the total is then a lower bound that says so (`SearchPage.total_exact`). rg is
  left waiting, and the next page of the same query (offset > 0) reads on from it
  (`talaria.tools.local.ripgrep`), so pages neither repeat nor skip a match.
- Binary files: rg stops at a NUL byte after printing the matches before it; the file's
  matches are dropped when its `end` record names a binary offset, as the Python walk skips
  the file.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
import shutil
import time
from collections.abc import Hashable
from pathlib import Path

import anyio

from talaria.tools import workspace
from talaria.tools.local import rg_json, ripgrep
from talaria.tools.local.rg_json import Found
from talaria.tools.local.walk import (
    SKIP_DIRS,
    expand_braces,
    glob_ok,
    hidden,
    py_content,
    py_files,
)
from talaria.tools.workspace import SearchMatch, WorkspaceError

SEARCH_TIMEOUT_S = 60.0
_GLOB_CHARS = frozenset("*?[{")


def ripgrep_path() -> str | None:
    """The `rg` executable, or None to use the Python backend."""
    return _which_rg(os.environ.get("PATH"))


@functools.lru_cache(maxsize=4)
def _which_rg(path: str | None) -> str | None:
    return shutil.which("rg", path=path)


async def search(
    pattern: str, *, root: Path, target: str = "content", file_glob: str | None = None,
    cap: int = 51, offset: int = 0, owner: Hashable = None,
) -> Found:
    """Matches under `root` (a directory or one file): at least the first `cap` a search
    finds, or all there are (`Found.complete`). With rg, in the order it found them, and a
    search at `offset` > 0 reads on the run of `owner`'s last search for the same query, so
    its pages follow that one's; the Python walk's are in path order."""
    if target not in ("content", "files"):
        raise ValueError(f"target must be 'content' or 'files', not {target!r}")
    root_s = os.path.abspath(root)  # rg runs in this process's directory
    if not os.path.exists(root_s):
        raise FileNotFoundError(f"No such file or directory: {root}")
    is_dir = os.path.isdir(root_s)
    found = await _search(pattern, root_s, is_dir, target, file_glob, cap, offset, owner)
    if not is_dir:  # paths are relative to the root: a file root is "."
        found = Found([SearchMatch(".", m.line, m.text) for m in found.page()], found.complete)
    return found


async def _search(
    pattern: str, root_s: str, is_dir: bool, target: str, file_glob: str | None, cap: int,
    offset: int, owner: Hashable,
) -> Found:
    globs = expand_braces(file_glob) if file_glob else None
    names = (expand_braces(pattern if _GLOB_CHARS & set(pattern) else f"*{pattern}*")
             if target == "files" else None)
    rg = ripgrep_path()
    key = (owner, root_s, target, pattern, file_glob)
    # rg first: what follows runs while it starts (~3 ms before its first output)
    run = _rg_run(rg, root_s, is_dir, pattern, names, globs, offset, key) if rg else None
    deadline = time.monotonic() + SEARCH_TIMEOUT_S  # the Python walk checks it between files
    try:
        with anyio.fail_after(SEARCH_TIMEOUT_S):
            if names is not None:
                if run is not None:
                    return await _read(run, key, cap)
                return _walked(await anyio.to_thread.run_sync(
                    py_files, root_s, names, globs, deadline, cap, abandon_on_cancel=True
                ), cap)
            try:
                regex = re.compile(pattern)
            except re.error as exc:
                if run is not None:
                    ripgrep.RUNS.discard(key, run)
                raise WorkspaceError(f"invalid regex {pattern!r}: {exc}") from None
            if run is not None:
                found = await _read(run, key, cap)
                if not found.refused:
                    return found
                ripgrep.RUNS.drop(key)  # rg rejected the pattern: Python runs it
            return _walked(await anyio.to_thread.run_sync(
                py_content, root_s, regex, globs, deadline, cap, abandon_on_cancel=True
            ), cap)
    except TimeoutError:
        raise WorkspaceError(
            f"search timed out after {SEARCH_TIMEOUT_S:.0f} s; narrow the path or file_glob"
        ) from None


def _walked(found: list[tuple[str, int | None, str | None]], cap: int) -> Found:
    """The Python walk's first `cap` matches: all there are when fewer."""
    return Found([SearchMatch(*m) for m in found], len(found) < cap)


def _prunes(globs: list[str] | None) -> bool:
    """Whether rg is given the globs (`_rg_base`), so that they outrank its hidden-file rule."""
    return bool(globs) and all("/" not in g and not g.startswith("!") for g in globs or ())


def _rg_base(rg: str, globs: list[str] | None) -> list[str]:
    """rg's walk as the Python walk's. Globs on the file name prune what rg reads (glob_ok
    still decides: both backends agree on every glob); globs on the path, or negated ones,
    mean something else to rg and are left out. A glob rg is given outranks its hidden-file
    rule and the globs before it (the last match wins: `*.js` would list `.eslintrc.js`, and
    `*` the files in `node_modules/`), so the skipped directories come after it, and the
    readers drop hidden paths (`hidden`: a `!.*` glob cost rg 5-7% of a walk, on every name
    it sees)."""
    argv = [rg, "--no-config", "--no-ignore"]
    for g in globs or () if _prunes(globs) else ():
        argv += ["-g", g]
    for d in SKIP_DIRS:
        argv += ["-g", f"!{d}/"]
    return argv


def _rg_run(
    rg: str, root: str, is_dir: bool, pattern: str, names: list[str] | None,
    globs: list[str] | None, offset: int, key: Hashable,
) -> ripgrep.Run:
    """`key`'s run: the one kept for its next page (offset > 0), else a new one, started: rg
    listing the files `names` and `globs` match (`names` given), or searching their contents."""
    run = ripgrep.RUNS.get(key) if offset else None
    if run is not None:
        return run
    rel = rg_json.relative(root, is_dir)
    reader: rg_json.Lines | rg_json.Names
    if names is not None:
        shown = _prunes(names) and is_dir  # rg may list hidden files: dropped here

        def keep(path: str) -> bool:
            return (glob_ok(path, names) and (globs is None or glob_ok(path, globs))
                    and not (shown and hidden(path)))

        argv = [*_rg_base(rg, names), "--files"]
        reader = rg_json.Names(rel, keep, workspace.MAX_SEARCH_MATCHES)
    else:
        argv = [*_rg_base(rg, globs), "--json", "--crlf", "--no-mmap", "-e", pattern]
        skip_hidden = _prunes(globs) and is_dir  # rg may search hidden files
        reader = rg_json.Lines(rel, globs, workspace.MAX_SEARCH_MATCHES, skip_hidden)
    return ripgrep.RUNS.start(key, [*argv, "--", root], reader)


async def _read(run: ripgrep.Run, key: Hashable, cap: int) -> Found:
    """Read `key`'s run on to `cap`, on the event loop (a worker thread's wake-ups cost a page
    ~0.5 ms; an asyncio subprocess adds a child watcher); a search cancelled or timed out
    stops its rg. `refused` when rg rejects the pattern."""
    try:
        return await run.read(cap)
    except BaseException:
        ripgrep.RUNS.discard(key, run)  # cancelled or timed out: rg must not run on
        raise
    finally:  # the runs this one pushed out: stopped once its page is out, off its path
        asyncio.get_running_loop().call_soon(ripgrep.RUNS.settle)
