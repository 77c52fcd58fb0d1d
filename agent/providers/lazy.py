"""SDK clients built on first use, one per event loop.

Building the client imports its SDK (0.3-1 s), which an editor should not wait for on
`initialize` or `session/new`; it is paid on the first model call instead, in a worker thread
(`load()`): on the event loop it held up every other request of the editor for that long. An SDK client's
pooled connections belong to the event loop that opened them, and reusing them from another
loop (a script calling `anyio.run` twice) fails with "Event loop is closed" or a reset
connection, so a new loop gets a new client. The SDK's first import runs with the garbage
collector paused, and what it imported is frozen after (`talaria.agent.gcpause`).
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from typing import Any

import anyio

from talaria.agent import codecache, gcpause, lazytypes

CONNECT_TIMEOUT = 10.0
"""Seconds to reach the host: unreachable hosts fail fast, slow generations still get `timeout`."""


class LoopBoundClient:
    """`sdk.client_class(**options)` with the settings every provider shares: no SDK retries
    (RetryingProvider owns retrying) and a short connect timeout."""

    def __init__(
        self, sdk: str, client_class: str, *, timeout: float, warm: str = "", **options: Any
    ) -> None:
        self._sdk_name = sdk
        self._class = client_class
        self._warm = warm
        """Attribute path built with the client (`chat.completions`): the SDKs import their
        resource modules on first access, 50 ms more that would otherwise land on the loop."""
        self._timeout = timeout
        self._options = options
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loading: anyio.Event | None = None
        """Set while a `load` builds the client: a second caller (the first prompt while
        `warm()` runs) waits for it instead of building another."""

    @property
    def sdk(self) -> Any:
        return importlib.import_module(self._sdk_name)

    def get(self) -> Any:
        """The client for the running loop, built here if needed (see `load`)."""
        loop = asyncio.get_running_loop()
        if self._client is None or loop is not self._loop:
            self._client, self._loop = self._build(), loop
        return self._client

    async def load(self) -> Any:
        """The client for the running loop, its SDK imported and the client built (SSL
        context included) in a worker thread, so that the event loop keeps serving."""
        loop = asyncio.get_running_loop()
        if self._loading is not None and loop is self._loop:
            await self._loading.wait()
        if self._client is None or loop is not self._loop:
            self._loading, self._loop, self._client = anyio.Event(), loop, None
            try:
                self._client = await anyio.to_thread.run_sync(self._build)
            finally:
                self._loading.set()
                self._loading = None
        return self._client

    def _build(self) -> Any:
        if self._sdk_name in sys.modules:
            return self._make(self.sdk)
        lazytypes.install(f"{self._sdk_name}.types")  # its API's other models: when used
        with gcpause.paused():  # the SDK's first import: see talaria.agent.gcpause
            client = self._make(self.sdk)
        codecache.save()  # what its import compiled (typing's forward references), kept
        return client

    def _make(self, sdk: Any) -> Any:
        timeout = sdk.Timeout(self._timeout, connect=min(self._timeout, CONNECT_TIMEOUT))
        client = getattr(sdk, self._class)(max_retries=0, timeout=timeout, **self._options)
        target = client
        for name in filter(None, self._warm.split(".")):
            target = getattr(target, name)
        return client
