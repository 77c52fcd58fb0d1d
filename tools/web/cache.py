"""The page cache: URL -> extracted page, for `ttl` seconds, bounded in entries and characters.

A script that extracts the same page twice (or the model that asks again a turn later) pays
for it once. Failures are not cached: a page that was down may be back.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from talaria.tools.web.settings import CACHE_CHARS, CACHE_ENTRIES


@dataclass(frozen=True, slots=True)
class Page:
    url: str
    """The URL asked for."""
    final_url: str
    """Where it was read from, after redirects."""
    title: str
    text: str
    """The whole extracted text (markdown for HTML)."""
    content_type: str
    truncated_download: bool = False
    """The response was longer than the byte limit: `text` is from its first part."""


class PageCache:
    def __init__(self, ttl: float, *, max_entries: int = CACHE_ENTRIES,
                 max_chars: int = CACHE_CHARS, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self.max_chars = max_chars
        self.clock = clock
        self._entries: OrderedDict[str, tuple[float, Page]] = OrderedDict()
        self._chars = 0
        self.hits = 0

    def get(self, key: str) -> Page | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        stored, page = entry
        if self.clock() - stored > self.ttl:
            self._drop(key)
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return page

    def put(self, key: str, page: Page) -> None:
        if len(page.text) > self.max_chars:
            return  # one page bigger than the whole cache: not worth evicting everything
        if key in self._entries:
            self._drop(key)
        self._entries[key] = (self.clock(), page)
        self._chars += len(page.text)
        while len(self._entries) > self.max_entries or self._chars > self.max_chars:
            self._drop(next(iter(self._entries)))

    def __len__(self) -> int:
        return len(self._entries)

    def _drop(self, key: str) -> None:
        _, page = self._entries.pop(key)
        self._chars -= len(page.text)
