"""Token counting that never touches the network.

tiktoken downloads its encodings on first use, which fails offline. Talaria ships
`cl100k_base.tiktoken` (sha256 checked, as tiktoken does) and builds the encoding from it;
if tiktoken itself is unavailable, `count` falls back to an estimate of one token per four
UTF-8 bytes, which over-counts English slightly and is safe for budgeting.

Counts are cached by text: the loop sizes the same texts at every call. Counting a
200K-token session with tiktoken takes ~90 ms; a cached one ~1 ms. The cache holds no text,
only hash -> count in flat arrays (`count_cache.py`, ~20-36 bytes a text), so it pins no
memory of dropped messages. Compaction counts
nothing: `estimate` takes the cached count, else a third of the UTF-8 bytes.

On the event loop, only `bound` / `bound_messages`: an upper bound that never builds the
tokenizer. The loop sizes the context with the bound before every model call; only when the
bound reaches the compaction threshold does compaction count exactly, in a worker thread
(`LiveContext.exact`, `live.py`: the counts are cached, so the bound of those texts is then
exact), and decide on the exact count. A short session never counts
exactly at all. Building the tokenizer holds the GIL for 60-90 ms in one step (tiktoken's
`CoreBPE`, in Rust), which stalls every thread: `talaria acp` therefore counts exactly in a
child process (`count_with`, `token_child.py`), which keeps the tables' ~14 MB too.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

from talaria.agent.context.count_cache import CountCache

log = logging.getLogger(__name__)

ENCODING_FILE = Path(__file__).parents[1] / "data" / "cl100k_base.tiktoken"
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
BYTES_PER_TOKEN = 4
EXACT_LIMIT = 400_000
"""Characters counted exactly; longer texts are estimated. tiktoken takes ~0.6 s per MB on
the event loop, which would hold up cancellation and every other session."""
# Per-message framing overhead of chat formats (role markers, separators).
MESSAGE_OVERHEAD = 4
IMAGE_TOKENS = 1000
"""An image in a message: a flat estimate of a mid-size image."""
CACHE_MIN_CHARS = 16
"""Shorter texts are counted each time: cheaper than a cache entry."""
ESTIMATE_BYTES_PER_TOKEN = 3
"""`estimate`'s bytes per token for a text never counted: cl100k's ratio on tool output and
code is ~3-3.5 (prose ~4.5), so the estimate errs high on most of what compaction drops."""
CACHE_ENTRIES = 50_000
"""Texts whose count is kept (at most ~1.5 MB); when full, the cache starts again empty."""

_counts = CountCache()
_counter: Callable[[str], int | None] | None = None
"""Where exact counts are made instead of here (`count_with`); its None means: here."""
_building = threading.Lock()
"""One build of the encoding at a time: two threads counting at once would build it twice."""


def encoding() -> Any | None:
    """The cl100k_base encoding from the bundled file, or None if it cannot be built."""
    with _building:
        return _encoding()


@cache
def _encoding() -> Any | None:
    try:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        ranks = load_tiktoken_bpe(str(ENCODING_FILE), expected_hash=CL100K_SHA256)
        specials = {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        }
        return tiktoken.Encoding(
            "cl100k_base", pat_str=CL100K_PATTERN, mergeable_ranks=ranks, special_tokens=specials
        )
    except Exception as exc:  # missing package, corrupt file: estimate instead
        log.warning("tiktoken unavailable (%s); estimating tokens as bytes/4", exc)
        return None


def count(text: str) -> int:
    """Tokens of `text` (cl100k_base), from the cache when this text was counted before."""
    if len(text) < CACHE_MIN_CHARS:
        return _count(text)
    # A str caches its own hash, so a repeated lookup of the same message text costs O(1).
    key = hash(text)
    found = _counts.get(key)
    if found is None:
        found = _count(text)
        _counts.put(key, found, CACHE_ENTRIES)
    return found


def bound(text: str) -> int:
    """An upper bound on `count(text)` that never builds the tokenizer: the count itself when
    it is cached, else the text's UTF-8 bytes (cl100k is a byte-level BPE: every token is at
    least one byte; the estimates `count` falls back to are a quarter of that)."""
    found = _cached(text)
    return _bytes(text) if found is None else found


def estimate(text: str) -> int:
    """`count(text)` if this text was counted before, else an estimate from its UTF-8 bytes
    (`ESTIMATE_BYTES_PER_TOKEN`): never builds the tokenizer, never counts. For figures that
    need no exact count (compaction's budgets and totals); an estimate may undercount, so
    never for a decision that the window holds a request (`count`, or `bound` on the loop)."""
    found = _cached(text)
    return _from_bytes(text) if found is None else found


def _from_bytes(text: str) -> int:
    """`estimate` of a text never counted: its UTF-8 bytes / ESTIMATE_BYTES_PER_TOKEN."""
    return -(-_bytes(text) // ESTIMATE_BYTES_PER_TOKEN)


def _cached(text: str) -> int | None:
    return _counts.get(hash(text)) if len(text) >= CACHE_MIN_CHARS else None


def _bytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def clear_cache() -> None:
    """Forget every cached count (benchmarks measure cold counting with it)."""
    _counts.clear()


def count_with(counter: Callable[[str], int | None] | None) -> None:
    """From now on, make exact counts with `counter` (`token_child.TokenChild().count` under
    `talaria acp`), never building the tokenizer here; where it returns None, here after all."""
    global _counter
    _counter = counter


def _count(text: str) -> int:
    if _counter is not None and len(text) <= EXACT_LIMIT and (found := _counter(text)) is not None:
        return found
    enc = encoding() if len(text) <= EXACT_LIMIT else None
    if enc is None:
        return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)
    return len(enc.encode(text, disallowed_special=()))


def count_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
    """Approximate prompt tokens of a request: message texts, tool calls, tool definitions."""
    return _total(messages, tools, count)


def bound_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
    """An upper bound on `count_messages` (`bound` for each text): for the event loop."""
    return _total(messages, tools, bound)


def estimate_messages(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
) -> int:
    """`count_messages` where the texts were counted before, `estimate` for the rest."""
    return _total(messages, tools, estimate)


def estimate_total(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
) -> tuple[int, bool]:
    """`estimate_messages`, and whether it is exact: every text of `CACHE_MIN_CHARS` or more
    was counted before (a shorter one's estimate is off by a token or two at most)."""
    exact = True

    def counter(text: str) -> int:
        nonlocal exact
        if len(text) < CACHE_MIN_CHARS:
            return estimate(text)
        found = _counts.get(hash(text))
        if found is None:
            exact = False
            return _from_bytes(text)
        return found

    return _total(messages, tools, counter), exact


SAMPLE_POINTS = 32
"""Places `sampled` counts a slice at, spread evenly over the texts' characters."""
SAMPLE_CHARS = 400
"""Characters of each slice."""


def sampled(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
    """An estimate of `count_messages` from SAMPLE_POINTS slices of SAMPLE_CHARS, counted
    exactly, spread evenly over the texts' characters (a text is sampled as much as it
    weighs): their tokens per character times all the characters, plus what is known
    whatever the texts (framing, images, texts counted before). Counts ~13K characters
    whatever the size (1M tokens: ~2-4 ms against ~200-300 ms for all). Measured on 67K-1M
    token sessions of tool output, prose, CJK, base64 and two unlike halves: within -1%
    and +6% of the count. For a decision with a margin (`LiveContext.over`), never for one
    that the window holds a request."""
    fixed, texts = 0, []
    for message in messages:
        fixed += MESSAGE_OVERHEAD
        for text in _texts(message):
            if text is None:
                fixed += IMAGE_TOKENS
            elif (found := _cached(text)) is not None:
                fixed += found
            elif text:
                texts.append(text)
    if tools:
        texts.append(json.dumps(tools, separators=(",", ":")))
    chars = sum(map(len, texts))
    if chars <= SAMPLE_POINTS * SAMPLE_CHARS * 2:  # as cheap to count them all
        return fixed + sum(count(t) for t in texts)
    step, slices, index, start = chars / SAMPLE_POINTS, [], 0, 0
    for point in range(SAMPLE_POINTS):
        at = int((point + 0.5) * step)  # the middle of each step: a slice a step
        while start + len(texts[index]) <= at:
            start += len(texts[index])
            index += 1
        text, offset = texts[index], at - start
        left = max(0, min(offset - SAMPLE_CHARS // 2, len(text) - SAMPLE_CHARS))
        slices.append(text[left:left + SAMPLE_CHARS])
    per_char = sum(_count(s) for s in slices) / sum(map(len, slices))
    return fixed + round(chars * per_char)


def fingerprint(messages: list[dict[str, Any]], into: Any) -> None:
    """Feed hashlib object `into` all that `count_messages(messages)` depends on: equal digests
    of two lists of messages mean equal counts (`live.Counted`, a count kept with a session)."""
    for message in messages:  # a tag per item, texts length-prefixed: no two lists feed alike
        into.update(b"m")
        for text in _texts(message):
            if text is None:
                into.update(b"i")
                continue
            data = text.encode("utf-8", "surrogatepass")
            into.update(b"t" + len(data).to_bytes(8, "big"))
            into.update(data)


def _total(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, counter: Callable[[str], int]
) -> int:
    total = 0
    for message in messages:
        total += MESSAGE_OVERHEAD
        for text in _texts(message):
            total += IMAGE_TOKENS if text is None else counter(text)
    if tools:
        total += counter(json.dumps(tools, separators=(",", ":")))
    return total


def _texts(message: dict[str, Any]) -> Iterator[str | None]:
    """The texts of `message` a request carries, in order; None for an image."""
    content = message.get("content")
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            yield part.get("text", "") if part.get("type") == "text" else None
    for call in message.get("tool_calls") or ():
        yield call.get("name", "")
        yield call.get("arguments", "")
