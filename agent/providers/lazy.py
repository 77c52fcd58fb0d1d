"""SDK clients built on first use, one per event loop.

Building the client imports its SDK (0.3-1 s), which an editor should not wait for on
`initialize` or `session/new`; it is paid on the first model call instead. An SDK client's
pooled connections belong to the event loop that opened them, and reusing them from another
loop (a script calling `anyio.run` twice) fails with "Event loop is closed" or a reset
connection, so a new loop gets a new client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


class LoopBoundClient:
    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is None or loop is not self._loop:
            self._client, self._loop = self._factory(), loop
        return self._client
