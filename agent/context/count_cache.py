"""Exact token counts by text in two flat arrays: 12 bytes a slot, 18-36 bytes a text.

A dict of (hash, length) -> count took ~180 bytes a text (a tuple, three ints, the dict's
slot): 4.8 MB for a loaded 20,000-message session counted ahead of its first prompt, a quarter
of its memory past the texts themselves (issue 29 point 5). Here a text's key is its 64-bit
str hash (two different texts with one hash would only swap two counts), in an open-addressed
table of int64 keys and int32 counts that doubles as it fills, up to the entry limit; past it
the table starts again empty.

Thread-safe: the event loop looks counts up while a worker thread counts. Writers take a lock,
and within one table a slot, once written, is never written again (nothing is deleted); its
count is written before its key, so a reader that finds its key finds its count. A table that
grows or starts again is a new one, swapped in whole (`_table`), never changed under a reader.
"""

from __future__ import annotations

import threading
from array import array

MIN_SLOTS = 1 << 10
MAX_COUNT = (1 << 31) - 1
"""Counts past int32 are not kept (a text of 8 GB: never counted exactly anyway)."""

_Table = tuple[array, array, int]
"""(keys, counts, mask): a key of 0 is an empty slot."""


def _empty(slots: int) -> _Table:
    return array("q", bytes(8 * slots)), array("i", bytes(4 * slots)), slots - 1


class CountCache:
    """Token counts by text hash; `get` from any thread, `put` from any thread."""

    __slots__ = ("_table", "_size", "_lock")

    def __init__(self) -> None:
        self._table: _Table = _empty(MIN_SLOTS)
        self._size = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._size

    def get(self, key: int) -> int | None:
        keys, counts, mask = self._table
        key = key or 1
        slot = key & mask
        while True:
            found = keys[slot]
            if found == key:
                return counts[slot]
            if not found:
                return None
            slot = (slot + 1) & mask

    def put(self, key: int, count: int, limit: int) -> None:
        """Keep `count` for `key`; a cache of `limit` entries starts again empty."""
        if not 0 <= count <= MAX_COUNT:
            return
        key = key or 1
        with self._lock:
            if self._size >= limit:
                self._table, self._size = _empty(MIN_SLOTS), 0
            elif (self._size + 1) * 3 > len(self._table[0]) * 2:  # fuller than 2/3: double
                self._table = self._grown(len(self._table[0]) * 2)
            keys, counts, mask = self._table
            slot = key & mask
            while keys[slot]:
                if keys[slot] == key:
                    return
                slot = (slot + 1) & mask
            counts[slot] = count
            keys[slot] = key
            self._size += 1

    def clear(self) -> None:
        with self._lock:
            self._table, self._size = _empty(MIN_SLOTS), 0

    def _grown(self, slots: int) -> _Table:
        old_keys, old_counts, _ = self._table
        keys, counts, mask = table = _empty(slots)
        for n, key in enumerate(old_keys):
            if key:
                slot = key & mask
                while keys[slot]:
                    slot = (slot + 1) & mask
                counts[slot] = old_counts[n]
                keys[slot] = key
        return table
