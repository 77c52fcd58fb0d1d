"""Cached bytecode for the files sandboxed processes run: they cannot write `__pycache__`.

The launcher (imported by `tiers.BOOT`) and the execute_code kernel (loaded by the launcher's
`run_here`) would otherwise be compiled from source at every sandbox start: ~8 ms each of a
kernel's cold start on a loaded machine.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

log = logging.getLogger(__name__)

_compiled: set[Path] = set()


def precompile(path: Path) -> None:
    """Write `path`'s cached bytecode (`__pycache__`) unless it is current: a sandbox cannot
    write it, so without it each sandboxed start compiles the source again. Checked once per
    path and process; a read-only install keeps what pip compiled. Done whatever
    PYTHONDONTWRITEBYTECODE says: these are Talaria's own files, and the processes that load
    them run with -I, which ignores that variable anyway."""
    if path in _compiled:
        return
    _compiled.add(path)
    cached = importlib.util.cache_from_source(str(path))
    try:
        st = path.stat()
        with open(cached, "rb") as f:
            header = f.read(16)
        if (header[:4] == importlib.util.MAGIC_NUMBER and header[4:8] == b"\0\0\0\0"
                and int.from_bytes(header[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
                and int.from_bytes(header[12:16], "little") == st.st_size & 0xFFFFFFFF):
            return
    except OSError:
        pass
    import py_compile

    try:
        py_compile.compile(str(path), cached, doraise=True)
    except (OSError, py_compile.PyCompileError) as exc:
        log.debug("sandbox: cannot cache bytecode for %s: %s", path, exc)
