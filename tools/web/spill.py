"""Long texts returned inline as head + tail, the whole text saved to a file the model can
page with `read_file` (web pages, MCP results). Files are named by content hash, so the same
page saved twice is one file; old files are pruned."""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path

KEEP_S = 7 * 24 * 3600.0
"""Saved texts older than this are deleted when a new one is saved."""
MAX_FILES = 500
"""Saved texts kept per directory; the oldest go first."""


def head_tail(text: str, limit: int, head_share: float) -> tuple[str, int]:
    """`text` cut to about `limit` characters: its start and its end around a marker.
    Returns (shown, characters left out); (text, 0) when it fits."""
    if len(text) <= limit:
        return text, 0
    head = int(limit * head_share)
    tail = limit - head
    omitted = len(text) - head - tail
    marker = f"\n\n[... {omitted:,} characters omitted: the full text is in the saved file ...]\n\n"
    return text[:head] + marker + text[len(text) - tail:], omitted


def save(text: str, directory: Path, suffix: str = ".md") -> Path:
    """Write `text` under `directory` (made if needed), named by its hash; returns the path."""
    directory.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    path = directory / f"{digest}{suffix}"
    if not path.exists():
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(text, encoding="utf-8", errors="replace")
        partial.replace(path)  # never a half-written file under the final name
        prune(directory)
    else:
        with contextlib.suppress(OSError):
            os.utime(path)
    return path


def prune(directory: Path, *, keep_s: float = KEEP_S, max_files: int = MAX_FILES) -> int:
    """Delete saved texts past their age, then the oldest beyond `max_files`."""
    try:
        entries = [(p.stat().st_mtime, p) for p in directory.iterdir() if p.is_file()]
    except OSError:
        return 0
    entries.sort()
    now = time.time()
    doomed = [p for mtime, p in entries if now - mtime > keep_s]
    fresh = [p for mtime, p in entries if now - mtime <= keep_s]
    doomed += fresh[:max(0, len(fresh) - max_files)]
    for path in doomed:
        with contextlib.suppress(OSError):
            path.unlink()
    return len(doomed)
