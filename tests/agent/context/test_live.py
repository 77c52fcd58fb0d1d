"""The live context (`agent/context/live.py`): its running token totals count only what was
appended since they last counted, and whatever changes an earlier message (replace, clear, an
edit in place) makes them count again; the counts always equal a count of the whole."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from talaria.agent.context import tokens
from talaria.agent.context.live import SAMPLE_MARGIN, Counted, LiveContext, resumed
from talaria.agent.loop import run_turn
from tests.helpers import make_session

SYSTEM = {"role": "system", "content": "You are a careful assistant. " * 20}
TOOLS = [{"name": "read_file", "description": "Read a file. " * 30, "parameters": {"type": "object"}}]


def _user(i: int, words: int = 40) -> dict[str, Any]:
    return {"role": "user", "content": f"message {i}: " + "some words here " * words}


def _whole(live: LiveContext, tools: list[dict[str, Any]] = TOOLS) -> tuple[int, int]:
    """(bound, exact) of the whole context counted from nothing."""
    messages = list(live.messages)
    return tokens.bound_messages(messages, tools), tokens.count_messages(messages, tools)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many messages each count of messages took (counts of the tools alone left out)."""
    seen: list[int] = []
    for name in ("bound_messages", "count_messages"):
        real = getattr(tokens, name)

        def spy(messages: list[Any], tools: Any = None, _real: Any = real) -> int:
            if messages:
                seen.append(len(messages))
            return int(_real(messages, tools))

        monkeypatch.setattr(tokens, name, spy)
    return seen


def test_appends_are_counted_once(counted: list[int]) -> None:
    live = LiveContext([SYSTEM])
    tokens.clear_cache()
    first = live.bound(TOOLS)
    for i in range(5):
        live.append(_user(i))
    second = live.bound(TOOLS)
    assert counted == [1, 5], "the second bound counted only the five new messages"
    counted.clear()
    assert second == _whole(live)[0] > first
    exact = anyio.run(live.exact, TOOLS)
    live.append(_user(9))
    assert anyio.run(live.exact, TOOLS) > exact
    assert counted[-1] == 1, "the second exact count counted the one new message"


def test_an_exact_count_makes_the_bound_exact() -> None:
    live = LiveContext([SYSTEM, *(_user(i) for i in range(4))])
    tokens.clear_cache()
    bound = live.bound(TOOLS)
    exact = anyio.run(live.exact, TOOLS)
    assert exact == _whole(live)[1] < bound
    assert live.bound(TOOLS) == exact and live.used(TOOLS) == exact


def test_replace_and_clear_start_the_counts_again(counted: list[int]) -> None:
    live = LiveContext([SYSTEM, *(_user(i) for i in range(6))])
    live.bound(TOOLS)
    anyio.run(live.exact, TOOLS)
    generation = live.generation
    live.replace([SYSTEM, _user(7, words=2)], usage=321)
    assert live.generation > generation and live.last_usage == 321
    counted.clear()
    assert live.bound(TOOLS) == _whole(live)[0]
    assert anyio.run(live.exact, TOOLS) == _whole(live)[1]
    assert counted[:2] == [2, 2], "both totals counted the new context whole"
    live.clear()
    assert list(live.messages) == [SYSTEM] and live.last_usage == 0
    assert live.bound(TOOLS) == _whole(live)[0]
    assert anyio.run(live.exact, TOOLS) == _whole(live)[1]


def test_clear_without_a_system_prompt_leaves_nothing() -> None:
    live = LiveContext([_user(1), _user(2)])
    live.clear()
    assert list(live.messages) == [] and live.bound([]) == 0


def test_an_edit_in_place_is_counted_again() -> None:
    """An earlier message changes (an image retired): a total that kept its old count would
    be wrong from then on, whatever is appended after."""
    live = LiveContext([SYSTEM, _user(1, words=400), _user(2)])
    before = live.bound(TOOLS)
    anyio.run(live.exact, TOOLS)
    live.edit({1: {"role": "user", "content": "shorter now"}})
    assert live.messages[1]["content"] == "shorter now"
    after = live.bound(TOOLS)
    assert after == _whole(live)[0] < before
    assert anyio.run(live.exact, TOOLS) == _whole(live)[1]
    generation = live.generation
    live.edit({})
    assert live.generation == generation, "no change: the totals stand"


def test_the_tools_are_counted_at_each_call(counted: list[int]) -> None:
    """An MCP server's tools come and go between calls: they are never part of a total."""
    live = LiveContext([SYSTEM, _user(1)])
    without = live.bound([])
    with_tools = live.bound(TOOLS)
    assert with_tools - without == tokens.bound_messages([], TOOLS) > 0
    assert counted == [2], "the messages were counted once"


def test_a_count_made_while_the_context_was_replaced_is_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exact count runs in a worker thread; a compaction may replace the context before it
    returns: that count is the old context's and must not be resumed from."""
    live = LiveContext([SYSTEM, *(_user(i) for i in range(3))])
    started, release = threading.Event(), threading.Event()
    real = tokens.count_messages

    def slow(messages: list[Any], tools: Any = None) -> int:
        if messages:
            started.set()
            release.wait(10)
        return real(messages, tools)

    monkeypatch.setattr(tokens, "count_messages", slow)

    async def race() -> int:
        async with anyio.create_task_group() as tg:
            async def replace_meanwhile() -> None:
                await anyio.to_thread.run_sync(started.wait, 10)
                live.replace([SYSTEM, _user(8, words=1)])
                release.set()

            tg.start_soon(replace_meanwhile)
            old = await live.exact(TOOLS)
        return old

    old = anyio.run(race)
    assert old > _whole(live)[1], "it counted the context it was asked about"
    monkeypatch.setattr(tokens, "count_messages", real)
    assert anyio.run(live.exact, TOOLS) == _whole(live)[1]


def test_a_kept_count_spares_a_loaded_context_the_count(counted: list[int]) -> None:
    """Each exact total goes to `on_counted`; a context loaded in a new process (nothing
    cached) with the same first messages goes on from it and counts only what came after."""
    messages = [SYSTEM, *(_user(i) for i in range(5))]
    live, kept = LiveContext(messages), list[Counted]()
    live.on_counted = kept.append
    anyio.run(live.exact, TOOLS)
    tokens.clear_cache()
    counted.clear()
    loaded = LiveContext([*messages, _user(6)])
    loaded.on_counted = kept.append
    loaded.resume(resumed(loaded.messages, kept[-1].to_json()))
    exact = anyio.run(loaded.exact, TOOLS)
    assert counted == [1], "only the message after the kept count was counted"
    assert exact == _whole(loaded)[1] and loaded.bound(TOOLS) == exact
    # The digest went on from the kept one: the new total is kept for the next load.
    assert kept[-1].messages == 7 and resumed(list(loaded.messages), kept[-1].to_json())


def test_counting_ahead_counts_once_and_only_over_the_threshold(counted: list[int]) -> None:
    """A loaded session (nothing cached) is counted ahead of its first prompt only when its
    bound reaches the threshold; the prompt's exact count, made meanwhile, waits for that one
    and counts nothing again."""
    live = LiveContext([SYSTEM, *(_user(i) for i in range(6))])
    tokens.clear_cache()
    anyio.run(live.count_ahead, TOOLS, live.bound(TOOLS) + 1)
    assert counted == [7], "the bound only: below the threshold nothing is counted"

    async def ahead_and_prompt() -> tuple[int, int]:
        async with anyio.create_task_group() as tg:
            tg.start_soon(live.count_ahead, TOOLS, 1.0)
            await anyio.sleep(0)  # the prompt comes while that count runs
            first = await live.exact(TOOLS)
        return first, await live.exact(TOOLS)

    counted.clear()
    assert anyio.run(ahead_and_prompt) == (_whole(live)[1],) * 2
    assert counted.count(7) == 3, counted  # the one exact count, then _whole's bound and count
    assert live.bound(TOOLS) == _whole(live)[1]


@pytest.mark.parametrize("change", ["text", "image", "image as text", "call", "fewer"])
def test_a_kept_count_of_other_texts_is_not_taken(change: str) -> None:
    messages = [SYSTEM, _user(1), {"role": "user", "content": [{"type": "text", "text": "see"}]},
                {"role": "assistant", "content": "", "tool_calls": [{"name": "f", "arguments": "{}"}]}]
    live, kept = LiveContext(messages), list[Counted]()
    live.on_counted = kept.append
    anyio.run(live.exact, TOOLS)
    saved = kept[-1].to_json()
    other = [dict(m) for m in messages]
    if change == "text":
        other[1]["content"] += "!"
    elif change == "image":
        other[2]["content"] = [{"type": "text", "text": "see"}, {"type": "image", "data": "AA"}]
    elif change == "image as text":  # what an image feeds the digest, as a text
        messages = [*messages[:2], {"role": "user", "content": [{"type": "image", "data": "A"}]}]
        other = [*messages[:2], {"role": "user", "content": [{"type": "text", "text": "\x00i"}]}]
        live = LiveContext(messages)
        live.on_counted = kept.append
        anyio.run(live.exact, TOOLS)
        saved = kept[-1].to_json()
    elif change == "call":
        other[3]["tool_calls"] = [{"name": "g", "arguments": "{}"}]
    else:
        other = other[:-1]
    assert resumed(messages, saved) is not None and resumed(other, saved) is None
    for garbage in (None, {}, {"messages": "x", "tokens": 1, "digest": ""}, {**saved, "messages": 0}):
        assert resumed(messages, garbage) is None


def test_a_stalled_compaction_waits_for_any_change() -> None:
    live = LiveContext([SYSTEM, _user(1)])
    live.mark_stalled()
    assert live.stalled
    live.append(_user(2))
    assert not live.stalled
    live.mark_stalled()
    live.replace([SYSTEM, _user(3), _user(4)])  # the same length, another context
    assert not live.stalled


def test_a_provider_without_usage_is_counted_only_for_what_is_new(
        fake_llm, tmp_path: Path, counted: list[int]) -> None:  # type: ignore[no-untyped-def]
    """A turn of three model calls whose provider reports no usage: each call's exact count
    (off the loop) counts the messages since the previous one, and the last is the whole."""
    session = make_session(fake_llm, tmp_path)
    (tmp_path / "project" / "a.txt").write_text("alpha\n")
    none = {"input_tokens": 0, "output_tokens": 0}
    call = {"name": "read_file", "arguments": {"path": "a.txt"}}
    fake_llm.script([{"tool_calls": [call], "usage": none}, {"tool_calls": [call], "usage": none},
                     {"text": "done", "usage": none}])
    assert anyio.run(run_turn, session, "read a.txt twice") == "end_turn"
    # Per call: the bound before it, the exact count after it; each of the two new messages
    # (the first call: the system prompt and the prompt; then a call and its result).
    assert counted == [2, 2, 2, 2, 2, 2], counted
    answered = list(session.messages)[:-1]  # the last answer came after its own count
    assert session.context.last_usage == tokens.count_messages(answered, session.tool_definitions())


def _loaded(seed: int = 7) -> tuple[LiveContext, int]:
    """A loaded context never counted (a session an older Talaria saved) of ~200K tokens,
    and its exact count (made on a copy, then forgotten)."""
    from benchmarks.synthetic import tool_heavy_session

    messages = tool_heavy_session(200_000, seed=seed)
    exact = tokens.count_messages(messages, TOOLS)
    tokens.clear_cache()
    return LiveContext(messages), exact


def _counted_share(live: LiveContext) -> float:
    texts = [m["content"] for m in live.messages if isinstance(m.get("content"), str)
             and len(m["content"]) >= tokens.CACHE_MIN_CHARS]
    return sum(tokens._cached(t) is not None for t in texts) / len(texts)


def _guess(live: LiveContext) -> int:
    guess = tokens.sampled(list(live.messages), TOOLS)
    tokens.clear_cache()  # the slices' counts are not the texts'
    return guess


@pytest.mark.parametrize("seed", [7, 11])
def test_a_context_never_counted_is_not_counted_whole_on_either_side_of_the_threshold(
    seed: int,
) -> None:
    # The sampled estimate decides, from the margin under the threshold: the first prompt of
    # such a session does not wait for a count of it all, however near the threshold it is.
    live, exact = _loaded(seed)
    guess = _guess(live)
    at = guess / (1 - SAMPLE_MARGIN)
    for threshold, compacts in ((at * 0.999, True), (at * 1.001, False), (exact, True),
                                (exact * 0.99, True), (guess * 0.8, True), (guess * 1.5, False)):
        assert anyio.run(live.over, TOOLS, threshold) is compacts, (threshold, exact, guess)
        assert compacts or exact < threshold  # not compacting is never wrong
        assert not compacts or exact >= threshold * 0.9  # compacting errs early by little
    assert _counted_share(live) < 0.1
    assert live.bound(TOOLS) > exact  # nothing taken as exact that was not counted


def test_a_context_mostly_counted_is_decided_by_its_exact_count() -> None:
    # Under SAMPLE_OVER bytes never counted: the exact count decides, to the token.
    live, exact = _loaded()
    assert anyio.run(live.exact, TOOLS) == exact
    live.append({"role": "user", "content": "one more question " * 50})
    now = anyio.run(live.exact, TOOLS)
    tokens.clear_cache()
    live.append({"role": "user", "content": "and another " * 50})
    added = tokens.count_messages(list(live.messages), TOOLS) - now
    tokens.clear_cache()
    assert anyio.run(live.over, TOOLS, now + added) is True
    assert anyio.run(live.over, TOOLS, now + added + 1) is False
    assert live.bound(TOOLS) == now + added


def test_the_sampled_estimate_is_within_a_few_percent() -> None:
    from benchmarks.synthetic import tool_heavy_session

    prose = [{"role": "user", "content": " ".join(f"w{i % 97} and the{i % 13}" for i in
                                                  range(j * 50, j * 50 + 400))} for j in range(600)]
    for messages in (tool_heavy_session(200_000), tool_heavy_session(1_000_000, seed=3), prose):
        exact = tokens.count_messages(messages, TOOLS)
        tokens.clear_cache()
        assert -0.03 < tokens.sampled(messages, TOOLS) / exact - 1 < 0.08
        assert tokens.sampled(messages[:3], TOOLS) == tokens.count_messages(messages[:3], TOOLS)
