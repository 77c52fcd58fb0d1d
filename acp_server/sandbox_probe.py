"""The sandbox tier for `initialize`'s `_meta`, detected off the start-up path."""

from __future__ import annotations

import logging
import threading

import anyio

log = logging.getLogger(__name__)


class SandboxProbe:
    """execute_code's sandbox tier, detected in a thread from start-up: detection runs bwrap
    once (~40 ms with its imports), which `initialize` should not wait for in line."""

    def __init__(self) -> None:
        self._tier = "unknown"
        self._done = threading.Event()
        threading.Thread(target=self._detect, name="sandbox-probe", daemon=True).start()

    def _detect(self) -> None:
        try:
            from talaria.tools.sandbox.tiers import detect_tier

            self._tier = detect_tier()
        except Exception:  # reported as "unknown"; execute_code reports its own failure
            log.exception("sandbox detection failed")
        finally:
            self._done.set()

    async def tier(self) -> str:
        if not self._done.is_set():
            await anyio.to_thread.run_sync(self._done.wait, 5.0)
        return self._tier
