"""Files several Talaria processes write at once: an exclusive lock, then an atomic replace.

Two sessions (an editor's and a `talaria run`) may add a memory or count a skill's use at the
same moment; a plain read-modify-write would lose one of the two. `locked(path)` holds an
`fcntl` lock on a sibling `.lock` file for the whole read-modify-write, and `write_atomic`
replaces the file in one rename, so a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the exclusive lock of `path` (blocking) for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def write_atomic(path: Path, text: str | bytes, mode: int | None = None) -> None:
    """Replace `path` with `text` (UTF-8) or bytes in one rename (fsynced first); `mode`:
    its permissions, else 0600."""
    path.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # not at import: it loads `random` and `shutil`, on `session/new`'s path

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode() if isinstance(text, str) else text)
            handle.flush()
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_text(path: Path) -> str:
    """The file's text, or "" when it does not exist yet."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
