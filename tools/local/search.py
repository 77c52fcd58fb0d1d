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
- Order: by path components, then line number. At most MAX_MATCHES results are collected, in
  that order, so paging through them is stable.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from talaria.tools.local.walk import (
    MAX_FILE_BYTES,
    MAX_LINE_CHARS,
    MAX_MATCHES,
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
    pattern: str, *, root: Path, target: str = "content", file_glob: str | None = None
) -> list[SearchMatch]:
    """All matches under `root` (a directory or one file), sorted, at most MAX_MATCHES."""
    if target not in ("content", "files"):
        raise ValueError(f"target must be 'content' or 'files', not {target!r}")
    root_s = os.path.normpath(root)
    if not os.path.exists(root_s):
        raise FileNotFoundError(f"No such file or directory: {root}")
    found = await _search(pattern, root_s, target, file_glob)
    if not os.path.isdir(root_s):  # paths are relative to the root: a file root is "."
        found = [SearchMatch(".", m.line, m.text) for m in found]
    return found


async def _search(
    pattern: str, root_s: str, target: str, file_glob: str | None
) -> list[SearchMatch]:
    globs = expand_braces(file_glob) if file_glob else None
    rg = ripgrep_path()
    deadline = time.monotonic() + SEARCH_TIMEOUT_S  # the Python walk checks it between files
    try:
        with anyio.fail_after(SEARCH_TIMEOUT_S):
            if target == "files":
                names = expand_braces(pattern if _GLOB_CHARS & set(pattern) else f"*{pattern}*")
                if rg:
                    return await _rg_files(rg, root_s, names, globs)
                return _matches(await anyio.to_thread.run_sync(
                    py_files, root_s, names, globs, deadline, MAX_MATCHES, abandon_on_cancel=True
                ))
            try:
                regex = re.compile(pattern)
            except re.error as exc:
                raise WorkspaceError(f"invalid regex {pattern!r}: {exc}") from None
            if rg:
                found = await _rg_content(rg, root_s, pattern, globs)
                if found is not None:
                    return found
            return _matches(await anyio.to_thread.run_sync(
                py_content, root_s, regex, globs, deadline, MAX_MATCHES, abandon_on_cancel=True
            ))
    except TimeoutError:
        raise WorkspaceError(
            f"search timed out after {SEARCH_TIMEOUT_S:.0f} s; narrow the path or file_glob"
        ) from None


def _matches(found: list[tuple[str, int | None, str | None]]) -> list[SearchMatch]:
    return [SearchMatch(*m) for m in found]


def _rel(path: str, root: str) -> str:
    if not os.path.isdir(root):
        return os.path.basename(root)
    return os.path.relpath(path, root).replace(os.sep, "/")


def _has_nul(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                if b"\0" in chunk:
                    return True
    except OSError:
        return True
    return False


async def _rg_stream(
    argv: list[str], take: Callable[[bytes], Awaitable[bool]]
) -> tuple[int | None, bytes]:
    """Run rg, feeding each stdout line to `take` until it returns False (then rg is killed).
    Returns (exit code, first 4 KB of stderr)."""
    err = bytearray()
    async with await anyio.open_process(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        stderr = proc.stderr

        async def read_err() -> None:
            async for chunk in stderr:
                err.extend(chunk[: max(0, 4096 - len(err))])

        async with anyio.create_task_group() as tg:
            tg.start_soon(read_err)
            part = bytearray()
            async for chunk in proc.stdout:
                *done, rest = chunk.split(b"\n")
                if done:
                    done[0] = bytes(part + done[0])
                    part = bytearray()
                part += rest
                wanted = True
                for line in done:
                    if not (wanted := await take(line)):
                        break
                if not wanted:
                    with contextlib.suppress(ProcessLookupError):  # rg may be done already
                        proc.kill()
                    break
        await proc.wait()
    return proc.returncode, bytes(err)


def _rg_base(rg: str) -> list[str]:
    argv = [rg, "--no-config", "--no-ignore", "--sort", "path"]
    for d in SKIP_DIRS:
        argv += ["-g", f"!{d}/"]
    return argv


async def _rg_files(
    rg: str, root: str, names: list[str], globs: list[str] | None
) -> list[SearchMatch]:
    out: list[SearchMatch] = []

    async def take(raw: bytes) -> bool:
        rel = _rel(os.fsdecode(raw), root)
        if glob_ok(rel, names) and (globs is None or glob_ok(rel, globs)):
            out.append(SearchMatch(rel))
        return len(out) < MAX_MATCHES

    await _rg_stream([*_rg_base(rg), "--files", "--", root], take)
    return out


def _text(field: dict[str, str]) -> str:
    if "text" in field:
        return field["text"]
    return os.fsdecode(base64.b64decode(field["bytes"]))


async def _rg_content(
    rg: str, root: str, pattern: str, globs: list[str] | None
) -> list[SearchMatch] | None:
    """Matches found by rg, or None when rg rejects the pattern (Python takes over)."""
    argv = [*_rg_base(rg), "--json", "--crlf", "--max-filesize", str(MAX_FILE_BYTES)]
    # rg's -g only prunes; glob_ok decides, so both backends agree on globs rg reads otherwise.
    if globs and all("/" not in g and not g.startswith("!") for g in globs):
        for g in globs:
            argv += ["-g", g]
    out: list[SearchMatch] = []
    binary: dict[str, bool] = {}

    async def take(raw: bytes) -> bool:
        if not raw.startswith(b'{"type":"match"'):
            return True
        data = json.loads(raw)["data"]
        path = _text(data["path"])
        rel = _rel(path, root)
        if globs is not None and not glob_ok(rel, globs):
            return True
        if path not in binary:  # rg stops at a NUL byte but may report the lines before it
            binary[path] = await anyio.to_thread.run_sync(_has_nul, path)
        if not binary[path]:
            text = _text(data["lines"]).removesuffix("\n").removesuffix("\r")
            out.append(SearchMatch(rel, data["line_number"], text[:MAX_LINE_CHARS]))
        return len(out) < MAX_MATCHES

    code, err = await _rg_stream([*argv, "-e", pattern, "--", root], take)
    if code == 2 and not out and b"regex" in err:
        return None
    return out
