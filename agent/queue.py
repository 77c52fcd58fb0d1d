"""Prompts that arrive while a turn runs: queued in order, answered when their own turn ends.

    async with session.prompts.turn("fix the tests") as admitted:
        if not admitted:            # dropped by `/queue clear` while it waited
            return "cancelled"
        ...run the turn...

One turn runs at a time per session; the others wait in arrival order (`waiting`, what `/queue`
lists). When a turn ends the first waiter is admitted at once, so no prompt arriving in between
can overtake it. `clear()` drops every waiter (each then answers `cancelled`); a cancel of the
running turn leaves the waiters alone. Steering notes (`/steer`) are not prompts: they go to
`Session.steer_notes` and join the running turn at its next model call (see `agent.loop`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio

PREVIEW_CHARS = 80
"""Characters of a waiting prompt shown by `/queue`."""


@dataclass(slots=True)
class Waiting:
    text: str
    admitted: anyio.Event = field(default_factory=anyio.Event)
    dropped: bool = False

    @property
    def preview(self) -> str:
        flat = " ".join(self.text.split())
        return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"


@dataclass(slots=True)
class PromptQueue:
    busy: bool = False
    """A turn (or a command that must not overlap one) is running."""
    waiting: list[Waiting] = field(default_factory=list)

    @asynccontextmanager
    async def turn(self, text: str, on_queued: Callable[[int], Awaitable[None]] | None = None
                   ) -> AsyncIterator[bool]:
        """Wait for this prompt's turn; yields False when it was dropped while waiting.
        `on_queued(ahead)` runs when it has to wait, once it holds its place: `ahead` counts
        the running turn and the prompts before it."""
        if self.busy:
            waiter = Waiting(text)
            # In line before the first await: prompts arriving together keep their order
            # and each sees how many are ahead of it.
            self.waiting.append(waiter)
            try:
                if on_queued is not None:
                    await on_queued(len(self.waiting))
                await waiter.admitted.wait()
            except BaseException:  # cancelled while waiting ($/cancel_request, shutdown)
                if waiter in self.waiting:
                    self.waiting.remove(waiter)
                elif not waiter.dropped:
                    self._next()  # admitted just now: hand the turn on
                raise
            if waiter.dropped:
                yield False
                return
        else:
            self.busy = True
        try:
            yield True
        finally:
            self._next()

    def _next(self) -> None:
        """The running turn ended: admit the first waiter (the queue stays busy) or go idle."""
        if self.waiting:
            self.waiting.pop(0).admitted.set()
        else:
            self.busy = False

    def clear(self) -> int:
        """Drop every waiting prompt; returns how many."""
        dropped, self.waiting = self.waiting, []
        for waiter in dropped:
            waiter.dropped = True
            waiter.admitted.set()
        return len(dropped)
