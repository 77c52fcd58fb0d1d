"""The live context: the messages the model is sent, and what is known of their size.

One owner for what five session fields used to keep in step by hand: the messages, the tokens
the provider reported at the last model call, two running totals that count only what was
appended since they last counted (an upper bound on the event loop, `tokens.bound_messages`;
an exact count in a worker thread, `tokens.count_messages`: the tokenizer's build, long texts
at ~0.6 s per MB), and the compaction that made no progress. A change to anything but the end (a replaced context, a cleared one, a message
edited in place) starts a new generation: a total counted in an older one is counted again.

    live.append(message)                   # through `Session.append`, which also stores it
    live.replace(messages, usage=after)    # compaction, a restored session
    live.clear()                           # /clear: the system prompt stays
    live.edit({index: message})            # earlier messages changed (images retired)
    used = live.used(tools)                # before a model call, on the event loop
    exact = await live.exact(tools)        # near the window, or when the provider said nothing
    live.on_counted = save                 # each exact total as a `Counted`, to keep
    live.resume(resumed(history, saved))   # a loaded session goes on from its kept count

The tool definitions are counted at each call, not kept in a total: an MCP server's tools
come and go between calls. The exact total is kept with the session (`Counted`, in its record's
meta) with a digest of the texts it counted: a session loaded in a new process, whose first
messages have that digest, goes on from it instead of counting them all again (1M tokens:
~0.2 s of tokenizer before its first model call).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from talaria.agent.context import tokens
from talaria.agent.transcript import ContextRow, Message, is_system, plain

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Total:
    """Tokens of the first `counted` messages of generation `generation`."""

    generation: int
    counted: int
    tokens: int
    digest: Any = None
    """Of an exact total: a hashlib object fed the texts of the messages counted."""


SAMPLE_OVER = 64 * 1024
"""Bytes never counted past which `LiveContext.over` first tries a sampled estimate."""
SAMPLE_MARGIN = 0.03
"""How far under the threshold a sampled estimate may be and still compact. Its error on the
sessions measured (`tokens.sampled`) is -1.2% to +5.4% (tests hold it within -3% and +8%):
so an estimate under the threshold by the margin is a session under it, and one that errs high
compacts a session at most ~10% before its threshold, which is all its error can cost."""

COUNTED_META = "counted"
"""The key of a session record's meta that keeps its last exact count (`Counted.to_json`)."""


@dataclass(frozen=True, slots=True)
class Counted:
    """An exact count of a context's first `messages` messages and the digest of their texts
    (`tokens.fingerprint`): kept with the session, it spares a loaded one the count."""

    messages: int
    tokens: int
    digest: str

    def to_json(self) -> dict[str, Any]:
        return {"messages": self.messages, "tokens": self.tokens, "digest": self.digest}

    @classmethod
    def from_json(cls, data: Any) -> Counted | None:
        try:
            return cls(int(data["messages"]), int(data["tokens"]), str(data["digest"]))
        except (TypeError, KeyError, ValueError):
            return None


@dataclass(frozen=True, slots=True)
class Resumed:
    """A kept count that matches a loaded context's first messages (`resumed`)."""

    counted: Counted
    digest: Any
    """The hashlib object fed those messages, to go on with."""


def resumed(messages: Sequence[Message], kept: Any) -> Resumed | None:
    """`kept` (a `Counted.to_json`) if the first messages of `messages` are the ones it
    counted, else None. Hashes their texts (1M tokens: ~5 ms): call it off the event loop."""
    counted = Counted.from_json(kept)
    if counted is None or not 0 < counted.messages <= len(messages):
        return None
    digest = _digest()
    tokens.fingerprint(list(messages[:counted.messages]), digest)
    return Resumed(counted, digest) if digest.hexdigest() == counted.digest else None


def _digest() -> Any:
    # The count's rules are in the digest: a kept count from other rules is not taken.
    import hashlib  # not at import: OpenSSL's load is 1 ms of `session/new`

    digest = hashlib.sha256()  # SHA extensions: twice blake2b's speed on x86-64 and ARMv8
    digest.update(f"cl100k {tokens.MESSAGE_OVERHEAD} {tokens.IMAGE_TOKENS}".encode())
    return digest


class LiveContext:
    """The messages sent to the model (the store keeps the whole transcript)."""

    __slots__ = ("_messages", "_generation", "_bound", "_exact", "_stalled", "_counting",
                 "last_usage", "on_counted")

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        self._messages: list[Message] = list(messages)
        self._generation = 0
        self._bound: _Total | None = None
        self._exact: _Total | None = None
        self._stalled: tuple[int, int] | None = None
        self._counting: anyio.Event | None = None
        self.last_usage = 0
        """Context tokens in use after the last model call, as the provider reported them."""
        self.on_counted: Callable[[Counted], None] | None = None
        """Called with each new exact total (the session keeps it in its record)."""

    @property
    def messages(self) -> Sequence[Message]:
        """The messages, to read (a change goes through this object's methods)."""
        return self._messages

    @property
    def generation(self) -> int:
        """Counts the changes of anything but the end: replace, clear, edit."""
        return self._generation

    def append(self, message: ContextRow) -> None:
        self._messages.append(plain(message))

    def replace(self, messages: Iterable[Message], *, usage: int = 0) -> None:
        """The context becomes `messages` (a compaction's result, a restored session); `usage`:
        their tokens when known (0: unknown until the next model call)."""
        self._messages = list(messages)
        self.last_usage = usage
        self._changed()

    def clear(self) -> None:
        """Drop every message but the system prompt."""
        self.replace(m for m in self._messages[:1] if is_system(m))

    def edit(self, changes: Mapping[int, Message]) -> None:
        """Put each message at its index (earlier messages changed in place); none: no change."""
        if not changes:
            return
        for index, message in changes.items():
            self._messages[index] = message
        self._changed()

    def bound(self, tools: list[dict[str, Any]]) -> int:
        """An upper bound on the context's tokens with `tools`, for the event loop (it never
        builds the tokenizer); counts only the messages appended since the last count."""
        start, before = self._resume(self._bound)
        total = before + tokens.bound_messages(self._messages[start:])
        self._bound = _Total(self._generation, len(self._messages), total)
        return total + tokens.bound_messages([], tools)

    def used(self, tools: list[dict[str, Any]]) -> int:
        """What the context takes, as far as is known on the event loop: the provider's last
        report or the bound, whichever is more (either may lag: the report what came after
        the call, the bound nothing)."""
        return max(self.last_usage, self.bound(tools))

    async def exact(self, tools: list[dict[str, Any]]) -> int:
        """The context's exact tokens with `tools`, counted off the event loop; only what was
        appended since the last exact count is counted (a long session would otherwise count
        thousands of messages per model call). The counts are cached, so the bound is then
        exact too. A count under way (`count_ahead`'s) is waited for, not repeated."""
        while self._counting is not None:
            await self._counting.wait()
        self._counting = counting = anyio.Event()
        try:
            start, before = self._resume(self._exact)
            generation, new = self._generation, self._messages[start:]
            digest = self._exact.digest if self._exact is not None and start else None
            counted, tool_tokens, fed = await anyio.to_thread.run_sync(_count, new, tools, digest)
        finally:
            self._counting = None
            counting.set()
        if generation == self._generation and new:  # else: replaced while counting, or no news
            self._exact = self._bound = _Total(generation, start + len(new), before + counted, fed)
            if self.on_counted is not None:
                self.on_counted(Counted(start + len(new), before + counted, fed.hexdigest()))
        return before + counted + tool_tokens

    async def over(self, tools: list[dict[str, Any]], threshold: float) -> bool:
        """Whether the context with `tools` reaches `threshold` tokens, for automatic
        compaction. Counted exactly, unless more than SAMPLE_OVER bytes were never counted (a
        loaded session with no kept count, prompted before its count ahead is done: 1M tokens
        take ~0.3 s): then a sampled estimate (`tokens.sampled`, ~2 ms) decides, compacting
        from SAMPLE_MARGIN under the threshold (a little early is all its error can cost). A
        request's fit in the window is never estimated (`fit.answer_room`)."""
        start, before = self._resume(self._exact)
        new = self._messages[start:]
        if tokens.bound_messages(new) > SAMPLE_OVER:  # a count ahead under way is not waited for
            guess = await anyio.to_thread.run_sync(tokens.sampled, new, tools)
            return before + guess >= threshold * (1 - SAMPLE_MARGIN)
        return await self.exact(tools) >= threshold

    async def count_ahead(self, tools: list[dict[str, Any]], threshold: float) -> bool:
        """Before a loaded session's first prompt (`SessionHost.warm`): if the bound reaches
        `threshold` tokens already, that prompt's automatic compaction would first wait for an
        exact count of it all (1M tokens: ~0.3 s, and the token child's start); it is made
        now, while the user reads and types. A kept count (`Counted`) leaves nothing to count.
        True if it counted."""
        if self.bound(tools) < threshold:
            return False
        try:
            await self.exact(tools)
        except Exception as exc:  # the first prompt counts again, and reports what fails
            log.info("could not count the loaded session ahead of its first prompt: %s", exc)
            return False
        return True

    def resume(self, resumed: Resumed | None) -> None:
        """Take a kept exact count of the first messages (`resumed` checked that they are the
        ones it counted); None: nothing to take."""
        if resumed is not None:
            counted = resumed.counted
            self._exact = self._bound = _Total(self._generation, counted.messages, counted.tokens,
                                               resumed.digest)

    def mark_stalled(self) -> None:
        """A compaction made no progress: `stalled` until the context changes."""
        self._stalled = (self._generation, len(self._messages))

    @property
    def stalled(self) -> bool:
        """True while the context is as it was when a compaction last made no progress (no
        loop of compactions that cannot help)."""
        return self._stalled == (self._generation, len(self._messages))

    def _resume(self, total: _Total | None) -> tuple[int, int]:
        """(messages counted, their tokens) of `total`, if it is of this generation."""
        if total is None or total.generation != self._generation:
            return 0, 0
        return total.counted, total.tokens

    def _changed(self) -> None:
        self._generation += 1
        self._bound = self._exact = None


def _count(
    messages: list[Message], tools: list[dict[str, Any]], digest: Any
) -> tuple[int, int, Any]:
    """Exact tokens of `messages` and of `tools`, apart (only the messages' go into a total),
    and a copy of `digest` (None: a new one) fed the messages."""
    digest = _digest() if digest is None else digest.copy()
    tokens.fingerprint(messages, digest)
    return tokens.count_messages(messages), tokens.count_messages([], tools), digest
