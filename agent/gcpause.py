"""The garbage collector paused while a large import runs, and what it imported frozen after.

Imports allocate objects that live as long as the process: a provider SDK (openai: about 800
modules, 125,000 objects with the agent's own) and `talaria acp`'s start. Meanwhile the
collector runs again and again (a young collection every 700 allocations, full ones over all
that was imported so far), a tenth of the SDK's import time here. Paused, then `gc.freeze()`:
what was imported moves to the permanent generation, so later full collections (during a
turn, on the event loop) no longer walk it: one with the SDK loaded took 32-45 ms, 110 ms on a
busy machine. Only a few hundred objects of such an import are garbage in cycles; freezing
keeps them, a bound paid once.

Freeze once per large import, not on every pause of a long-running process: what is alive then
(sessions, their messages) would be frozen too. Pauses nest and may come from several threads;
the collector runs again when the last one ends (unless it was off before the first).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = True
_freeze = False


def pause() -> None:
    """Stop collecting until the matching `resume()`."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1


def resume(freeze: bool = True) -> None:
    """End a `pause()`. When the last one ends, what is alive is frozen if any of them asked
    (`freeze`), and the collector runs again."""
    global _depth, _freeze
    with _lock:
        if _depth == 0:
            return
        _depth -= 1
        _freeze = _freeze or freeze
        if _depth == 0:
            if _freeze:
                gc.freeze()
            _freeze = False
            if _was_enabled:
                gc.enable()


@contextmanager
def paused(freeze: bool = True) -> Iterator[None]:
    pause()
    try:
        yield
    finally:
        resume(freeze)
