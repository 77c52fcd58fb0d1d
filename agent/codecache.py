"""Code compiled from generated source at every start, compiled once and kept across runs as
the interpreter keeps modules' bytecode.

Two parts of the standard library compile source they generate, at every start of every
process:
- `@dataclass` writes each method it adds (`__init__`, `__repr__`, `__eq__`; a frozen class's
  `__setattr__`, `__delattr__` and `__hash__`) as text and executes it. Python 3.11 compiles
  each on its own, about 70 µs apiece: 464 (87 classes) by `talaria acp`'s answer to
  `session/new`, 30 ms of its ~100 over the bare interpreter.
- `typing.ForwardRef` compiles every annotation given as a string. Pydantic models with
  postponed annotations make thousands: 2,492 (732 distinct) in the OpenAI SDK's import, which
  a prompt sent straight after `session/new` waits for.

`install()` routes both through a cache keyed by the exact source and mode: changed source
compiles afresh, and the same source compiles to the same code on the same interpreter, with
the same flags (none inherited, as the two callers have none). `save()` writes what was
compiled to a file beside the interpreter's own cache of this module's bytecode
(`__pycache__`, or `sys.pycache_prefix`), under the same rules: not when bytecode writing is
off (`PYTHONDONTWRITEBYTECODE`), silently not where that is read-only. The file's name carries
the interpreter's cache tag and its first bytes its bytecode magic number; a file of another
interpreter, or one cut short, is ignored and rewritten.
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
import typing
from pathlib import Path
from types import CodeType
from typing import Any

MAX_ENTRIES = 4096
"""Past this, a save keeps only what this process used (code that changed leaves old source;
`talaria acp` with the OpenAI SDK uses ~1,500)."""

_cache: dict[str, CodeType | bytes] = {}
"""Source → its code; as marshalled bytes until first used: the file holds each entry marshalled
on its own, so a start decodes only what it runs (the SDK's 756 annotations are not on
`initialize`'s path; all 1,482 decoded at once took 5 ms)."""
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
    return beside.with_name(f"generated-code.{tag}.marshal")


def install() -> None:
    """Compile dataclasses' methods and typing's forward references through the cache,
    loaded now. Each module looks its builtin up by name: this gives it one of its own."""
    global _installed
    if _installed:
        return
    _installed = True
    path = cache_file()
    if path is not None:
        _cache.update(_read(path))
    dataclasses.exec = _exec  # type: ignore[attr-defined]
    typing.compile = _compile  # type: ignore[attr-defined]
    atexit.register(save)


def _read(path: Path) -> dict[str, bytes]:
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
    return {k: v for k, v in entries.items() if isinstance(k, str) and isinstance(v, bytes)}


def _code(source: str, mode: str) -> CodeType:
    global _compiled
    key = f"{mode}\0{source}"
    code = _cache.get(key)
    if isinstance(code, bytes):
        try:
            code = marshal.loads(code)
        except (EOFError, ValueError, TypeError):
            code = None
        if not isinstance(code, CodeType):
            code = None
    if code is None:
        code = compile(source, "<string>", mode, dont_inherit=True)  # not this module's __future__
        _compiled += 1
    _cache[key] = code
    _used.add(key)
    return code


def _exec(source: Any, globals: dict[str, Any] | None = None, locals: Any = None) -> None:
    builtins.exec(_code(source, "exec") if isinstance(source, str) else source, globals, locals)


def _compile(source: Any, filename: Any, mode: str, *args: Any, **kwargs: Any) -> Any:
    if args or kwargs or not isinstance(source, str) or filename != "<string>":
        return builtins.compile(source, filename, mode, *args, **kwargs)
    return _code(source, mode)


def pending() -> bool:
    """Whether this process compiled code the file does not have yet."""
    return _installed and _compiled > 0


def save() -> None:
    """Write the cache if this process compiled anything new; never raises."""
    global _compiled
    path = cache_file()
    if not pending() or path is None or sys.dont_write_bytecode:
        return
    from talaria.tools.lockfile import write_atomic

    with _save_lock:
        entries = dict(_cache)
        if len(entries) > MAX_ENTRIES:
            entries = {k: v for k, v in entries.items() if k in _used}
        kept = {k: v if isinstance(v, bytes) else marshal.dumps(v) for k, v in entries.items()}
        _compiled = 0
        with contextlib.suppress(OSError, ValueError):
            write_atomic(path, importlib.util.MAGIC_NUMBER + marshal.dumps(kept),
                         mode=os.stat(__file__).st_mode & 0o666)  # as its .pyc
