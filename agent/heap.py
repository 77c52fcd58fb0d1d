"""Handing freed memory back to the system after a burst of short-lived allocations.

A transcript replayed or counted a page at a time frees what each page took, but glibc keeps
the freed memory in its heap, and the process's RSS stays at its peak. `trim` returns it
(`malloc_trim`, which walks the whole heap: call it off the event loop).
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def trim() -> None:
    """`malloc_trim(0)`; where libc is not glibc, the memory stays reusable here."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError) as exc:
        log.debug("malloc_trim unavailable: %s", exc)
