"""Reading and writing project files on a disk: the rules every workspace follows.

Standard library only and Python 3.8 syntax: `LocalWorkspace` uses it on this machine, and the
environment helper (`talaria.tools.environments.helper`) ships its source to a container or an
SSH host, so a file reads and writes the same wherever it lives.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

try:
    from talaria.tools.errors import WorkspaceError
except ImportError:  # shipped to an environment without Talaria installed

    class WorkspaceError(Exception):  # type: ignore[no-redef]
        """A file the tools cannot use (binary, too large, not a file)."""


MAX_READ_BYTES = 10 * 1024 * 1024
BINARY_SNIFF_BYTES = 8192
UTF8_BOM = b"\xef\xbb\xbf"


def read_text_sync(path: Path) -> str:
    """UTF-8 text of a regular file (a UTF-8 BOM is dropped); refuses binary and huge files."""
    st = os.stat(path)  # FileNotFoundError reaches the tool as is
    if stat.S_ISDIR(st.st_mode):
        raise WorkspaceError(f"{path} is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise WorkspaceError(f"{path} is not a regular file")
    if st.st_size > MAX_READ_BYTES:
        raise WorkspaceError(
            f"{path} is too large ({st.st_size:,} bytes; the limit is {MAX_READ_BYTES:,})"
        )
    data = Path(path).read_bytes()
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        raise WorkspaceError(f"binary file (NUL bytes): {path}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise WorkspaceError(f"binary file (not UTF-8 at byte {exc.start}): {path}") from None


def write_text_sync(path: Path, text: str) -> None:
    """Atomically replace `path` (through symlinks) with UTF-8 `text`, creating parents.
    An existing file keeps its mode and its UTF-8 BOM; a new file gets the umask default."""
    target = Path(os.path.realpath(path))
    if target.is_dir():
        raise WorkspaceError(f"{path} is a directory, not a file")
    target.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    try:
        mode: int | None = stat.S_IMODE(os.stat(target).st_mode)
        with open(target, "rb") as f:
            if f.read(3) == UTF8_BOM and not data.startswith(UTF8_BOM):
                data = UTF8_BOM + data
    except FileNotFoundError:
        mode = None
    tmp = target.with_name(f".{target.name}.{os.urandom(4).hex()}.tmp")
    # os.open with 0o666 lets the kernel apply the umask: mkstemp would leave 0600.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
