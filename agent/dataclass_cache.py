"""Compiled dataclass methods, kept across runs as the interpreter keeps modules' bytecode.

`@dataclass` writes each method it generates (`__init__`, `__repr__`, `__eq__`; a frozen class's
`__setattr__`, `__delattr__` and `__hash__`) as source text and compiles it, at every start of
every process. Python 3.11 compiles each method on its own: about 70 µs apiece, 464 of them
(87 classes) by `talaria acp`'s answer to `session/new`, 30 ms of its ~100 over the bare
interpreter. `install()` makes the dataclasses module compile through a cache keyed by that
exact source: a class whose fields change has new source and compiles afresh; the same source
compiles to the same code on the same interpreter, so a cached method is the one `compile`
would give. `save()` writes what was compiled to a file beside the interpreter's own cache of
this module's bytecode (`__pycache__`, or `sys.pycache_prefix`), under the same rules: not when
bytecode writing is off (`PYTHONDONTWRITEBYTECODE`), silently not where that is read-only.
The file's name carries the interpreter's cache tag and its first bytes its bytecode magic
number; a file of another interpreter, or one cut short, is ignored and rewritten.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import dataclasses
import importlib.util
import marshal
import os
import sys
import threading
from pathlib import Path
from types import CodeType
from typing import Any

MAX_ENTRIES = 4096
"""Past this, a save keeps only what this process used (code that changed leaves old source)."""

_cache: dict[str, CodeType] = {}
_used: set[str] = set()
_compiled = 0
_installed = False
_save_lock = threading.Lock()


def cache_file() -> Path | None:
    tag = sys.implementation.cache_tag
    if tag is None:
        return None
    try:
        beside = Path(importlib.util.cache_from_source(__file__))
    except (NotImplementedError, ValueError):
        return None
    return beside.with_name(f"dataclass-methods.{tag}.marshal")


def install() -> None:
    """Compile the dataclasses module's generated methods through the cache, loaded now."""
    global _installed
    if _installed:
        return
    _installed = True
    path = cache_file()
    if path is not None:
        _cache.update(_read(path))
    dataclasses.exec = _exec  # type: ignore[attr-defined]  # its generated methods' one exec
    atexit.register(save)


def _read(path: Path) -> dict[str, CodeType]:
    try:
        data = path.read_bytes()  # whole, then loads: `marshal.load` on a file reads in bits, 6× slower
    except OSError:
        return {}
    magic = importlib.util.MAGIC_NUMBER
    if not data.startswith(magic):
        return {}
    try:
        entries = marshal.loads(data[len(magic):])
    except (EOFError, ValueError, TypeError):
        return {}
    if not isinstance(entries, dict):
        return {}
    return {k: v for k, v in entries.items() if isinstance(k, str) and isinstance(v, CodeType)}


def _exec(source: Any, globals: dict[str, Any] | None = None, locals: Any = None) -> None:
    global _compiled
    if isinstance(source, str):
        code = _cache.get(source)
        if code is None:
            code = compile(source, "<string>", "exec")
            _cache[source] = code
            _compiled += 1
        _used.add(source)
        source = code
    builtins.exec(source, globals, locals)


def pending() -> bool:
    """Whether this process compiled methods the file does not have yet."""
    return _installed and _compiled > 0


def save() -> None:
    """Write the cache if this process compiled anything new; never raises."""
    global _compiled
    path = cache_file()
    if not _installed or not _compiled or path is None or sys.dont_write_bytecode:
        return
    import tempfile

    with _save_lock:
        entries = dict(_cache)
        if len(entries) > MAX_ENTRIES:
            entries = {k: v for k, v in entries.items() if k in _used}
        _compiled = 0
        with contextlib.suppress(OSError, ValueError):
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(importlib.util.MAGIC_NUMBER + marshal.dumps(entries))
                    os.fchmod(out.fileno(), os.stat(__file__).st_mode & 0o666)  # as its .pyc
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
