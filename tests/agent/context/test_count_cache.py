"""The flat-array count cache behind `tokens.count`: what it keeps, its bound, its memory and
threads counting into it while another reads."""

from __future__ import annotations

import random
import sys
import threading

from talaria.agent.context.count_cache import MIN_SLOTS, CountCache


def test_counts_come_back_by_key_through_growth() -> None:
    cache = CountCache()
    rng = random.Random(7)
    keys = [rng.randrange(-(1 << 63), 1 << 63) for _ in range(5_000)] + [0, 1, -1]
    for n, key in enumerate(keys):
        cache.put(key, n * 37 % 100_003, limit=50_000)
    assert len(cache) == len(set(keys) - {1})  # 0 and 1 share a slot: 0 is stored as 1
    for n, key in enumerate(keys[:-3]):
        assert cache.get(key) == n * 37 % 100_003
    assert cache.get(12345678901) is None


def test_a_key_keeps_its_first_count_and_huge_counts_are_not_kept() -> None:
    cache = CountCache()
    cache.put(99, 5, limit=10)
    cache.put(99, 6, limit=10)
    cache.put(100, 1 << 40, limit=10)
    assert (cache.get(99), cache.get(100), len(cache)) == (5, None, 1)


def test_a_full_cache_starts_again_and_stays_small() -> None:
    cache = CountCache()
    for key in range(1, 26):
        cache.put(key * 7919, key, limit=10)
        assert len(cache) <= 10
    assert cache.get(25 * 7919) == 25
    assert len(cache._table[0]) == MIN_SLOTS


def test_a_text_costs_tens_of_bytes_not_a_dict_entry() -> None:
    cache = CountCache()
    rng = random.Random(3)
    for _ in range(26_667):  # the texts of a 20,000-message session
        cache.put(rng.randrange(1 << 63), rng.randrange(20, 500), limit=50_000)
    keys, counts, _ = cache._table
    per_text = (sys.getsizeof(keys) + sys.getsizeof(counts)) / len(cache)
    assert per_text < 40, per_text  # a dict of (hash, length) -> count: ~180


def test_readers_never_see_a_wrong_count_while_writers_fill_it() -> None:
    cache = CountCache()
    wrong: list[int] = []
    done = threading.Event()

    def write(offset: int) -> None:
        for key in range(offset, 40_000, 2):
            cache.put(key * 2654435761, key % 9973, limit=30_000)

    def read() -> None:
        while not done.is_set():
            for key in range(1, 40_000, 97):
                found = cache.get(key * 2654435761)
                if found is not None and found != key % 9973:
                    wrong.append(key)

    writers = [threading.Thread(target=write, args=(n,)) for n in (1, 2)]
    reader = threading.Thread(target=read)
    reader.start()
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    done.set()
    reader.join()
    assert not wrong
