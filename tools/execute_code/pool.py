"""Which execute_code kernels live: one per session, a bounded number in all.

`KernelPool` keeps kernels by key (a session id): at most `max_live`, the least recently used
stopped first; one idle for `idle_s` is stopped (the kernel also exits by itself then). Why a
key's kernel ended is told once, by the next `acquire`. A front door may share one pool among
its sessions; each session holds a `SessionKernel`, whose `close()` stops only its own kernel.
`prestart` starts a key's kernel before its first `acquire` (when a session starts), so that
the first script does not wait for an interpreter to boot; it never stops a kernel that has
run code to make room.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from talaria.tools.execute_code.env import IDLE_S, MAX_KERNELS

if TYPE_CHECKING:
    from talaria.tools.execute_code.kernel import Kernel

CACHE_TTL_S = 86_400.0
"""Spilled outputs and scratch dirs older than this go when a session first runs code."""


def prune_cache(cache: Path, max_age: float = CACHE_TTL_S) -> None:
    """Delete what past kernels left in `cache` (after `kill -9`, nobody else will)."""
    cutoff = time.time() - max_age
    try:
        entries = list(os.scandir(cache))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.stat(follow_symlinks=False).st_mtime >= cutoff:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            pass



class KernelPool:
    """Live kernels by key (a session id)."""

    def __init__(self, max_live: int = MAX_KERNELS, idle_s: float = IDLE_S) -> None:
        self.max_live = max_live
        self.idle_s = idle_s
        self.kernels: dict[str, Kernel] = {}
        """In least recently used first order."""
        self.ended: dict[str, str] = {}

    async def acquire(self, key: str, fingerprint: tuple[Any, ...],
                      start: Callable[[], Awaitable[Kernel]]) -> tuple[Kernel, bool, str | None]:
        """(kernel, started now, why the previous one ended); `start` makes a new one."""
        self.reap()
        kernel = self.kernels.pop(key, None)
        if kernel is not None and kernel.fingerprint != fingerprint:
            kernel.kill()
            self.ended[key] = "its settings changed (mode, directory, interpreter or environment)"
            kernel = None
        if kernel is None:
            self._evict(self.max_live - 1)
            kernel = await start()
        self.kernels[key] = kernel
        return kernel, kernel.cells == 0, self.ended.pop(key, None)

    def prestart(self, key: str, fingerprint: tuple[Any, ...],
                 spawn: Callable[[], Kernel]) -> bool:
        """Start `key`'s kernel now unless it has one; `spawn` returns at once (the kernel
        boots in its own process). Makes room only by stopping other kernels that never ran
        code. Returns whether it started one."""
        self.reap()
        if key in self.kernels:
            return False  # acquire replaces it if its settings changed
        unused = [k for k, kernel in self.kernels.items() if kernel.cells == 0 and not kernel.busy]
        while len(self.kernels) >= self.max_live and unused:
            self.discard(unused.pop(0), None)
        if len(self.kernels) >= self.max_live:
            return False
        self.kernels[key] = spawn()
        return True

    def discard(self, key: str, reason: str | None) -> None:
        """Stop `key`'s kernel, remembering `reason` (if any) for the next acquire."""
        kernel = self.kernels.pop(key, None)
        self.ended.pop(key, None)
        if kernel is not None:
            kernel.kill()
            if reason:
                self.ended[key] = reason

    async def stop(self, key: str, reason: str, grace: float) -> None:
        """Like `discard`, but SIGTERM first and SIGKILL after `grace` seconds."""
        kernel = self.kernels.pop(key, None)
        if kernel is not None:
            self.ended[key] = reason
            await kernel.stop(grace)

    def reap(self) -> None:
        """Stop kernels that died or sat idle too long."""
        now = time.monotonic()
        for key, kernel in list(self.kernels.items()):
            if kernel.busy:
                continue
            # One that never ran code (prestarted) ends without a word: nothing was lost.
            if now - kernel.last_used >= self.idle_s:
                self.discard(key, f"it was idle for over {self.idle_s:g} s" if kernel.cells else None)
            elif not kernel.alive():
                self.discard(key, f"it exited (code {kernel.proc.returncode})" if kernel.cells
                             else None)

    def _evict(self, keep: int) -> None:
        for key, kernel in [(k, kernel) for k, kernel in self.kernels.items() if not kernel.busy]:
            if len(self.kernels) <= keep:
                break
            self.discard(key, f"at most {self.max_live} kernels run at once (least recently "
                              "used stopped)" if kernel.cells else None)

    def session(self, key: str) -> SessionKernel:
        return SessionKernel(self, key)

    def close(self) -> None:
        for key in list(self.kernels):
            self.discard(key, "the pool closed")


@dataclass(frozen=True, slots=True)
class SessionKernel:
    """One session's place in a (maybe shared) pool; `close()` stops only its kernel."""

    pool: KernelPool
    key: str

    async def acquire(self, fingerprint: tuple[Any, ...],
                      start: Callable[[], Awaitable[Kernel]]) -> tuple[Kernel, bool, str | None]:
        return await self.pool.acquire(self.key, fingerprint, start)

    def prestart(self, fingerprint: tuple[Any, ...], spawn: Callable[[], Kernel]) -> bool:
        return self.pool.prestart(self.key, fingerprint, spawn)

    def discard(self, reason: str | None) -> None:
        self.pool.discard(self.key, reason)

    async def stop(self, reason: str, grace: float) -> None:
        await self.pool.stop(self.key, reason, grace)

    def close(self) -> None:
        self.pool.discard(self.key, None)
