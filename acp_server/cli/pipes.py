"""stdout closed early (`talaria config | head`): the command stops quietly, as other commands
do, instead of a BrokenPipeError traceback or "[Errno 32] Broken pipe" (issue 28).

`guard_stdout()` wraps sys.stdout so a write to a closed pipe raises `PipeClosed`, which is a
BaseException: no `except OSError` / `except Exception` on the way up takes it for an error of
its own. `main` turns it into `exits.BROKEN_PIPE` (128 + SIGPIPE, what a shell reports for a
command a closed pipe ended). Not for `talaria acp` / `lsp`, whose stdout is the protocol."""

from __future__ import annotations

import os
import sys
from typing import Any


class PipeClosed(BaseException):
    """The reader of stdout went away."""


class GuardedStdout:
    """sys.stdout, with a broken pipe turned into PipeClosed."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            raise PipeClosed from None

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise PipeClosed from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_stdout() -> None:
    if not isinstance(sys.stdout, GuardedStdout):
        sys.stdout = GuardedStdout(sys.stdout)


def closed(exc: BaseException) -> bool:
    """Whether `exc` is, or a task group's exception holds, a closed stdout (what else the
    group holds followed from it: the ACP child's connection closed as the run stopped)."""
    if isinstance(exc, PipeClosed):  # not any BrokenPipeError: a dead child's stdin is no reason
        return True
    if isinstance(exc, BaseExceptionGroup):
        return any(closed(e) for e in exc.exceptions)
    return False


def silence() -> None:
    """Point stdout at /dev/null so the interpreter's last flush finds no closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ else 1)
        os.close(devnull)
    except OSError:
        pass
