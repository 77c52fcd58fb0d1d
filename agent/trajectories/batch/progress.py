"""A progress line on stderr: done, failed, rate, ETA.

On a terminal the line is redrawn in place (at most every `REDRAW_S`); elsewhere (a log file,
CI) a plain line is printed every `LOG_EVERY_S` so the log stays readable.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

BAR_WIDTH = 24
REDRAW_S = 0.2
LOG_EVERY_S = 10.0


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class Progress:
    """`total` tasks, `done` of them finished before this invocation (they count as done but
    not towards the rate)."""

    def __init__(
        self, total: int, *, done: int = 0, failed: int = 0, out: TextIO | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total, self.done, self.failed = total, done, failed
        self.ran = 0  # finished by this invocation
        self.out = out
        self.clock = clock
        self.started = clock()
        self.tty = bool(out is not None and getattr(out, "isatty", lambda: False)())
        self._drawn = float("-inf")

    def task_done(self, *, failed: bool) -> None:
        self.done += 1
        self.ran += 1
        self.failed += failed
        self.draw()

    def retried(self, count: int) -> None:
        """`count` failed tasks go back to pending (--retry-failed)."""
        self.done -= count
        self.failed -= count

    def line(self) -> str:
        elapsed = max(self.clock() - self.started, 1e-9)
        rate = self.ran / elapsed * 60
        left = self.total - self.done
        eta = format_duration(left / (self.ran / elapsed)) if self.ran else "?"
        filled = BAR_WIDTH * self.done // self.total if self.total else BAR_WIDTH
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        return (f"[{bar}] {self.done}/{self.total} done, {self.failed} failed, "
                f"{rate:.1f} tasks/min, ETA {eta}")

    def draw(self, *, final: bool = False) -> None:
        if self.out is None:
            return
        now = self.clock()
        if not final and now - self._drawn < (REDRAW_S if self.tty else LOG_EVERY_S):
            return
        self._drawn = now
        if self.tty:
            self.out.write("\r\x1b[2K" + self.line() + ("\n" if final else ""))
        else:
            self.out.write(self.line() + "\n")
        self.out.flush()
