"""Context compression: both stages, pair invariants, failures, the no-progress guard, overflow."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from benchmarks.synthetic import FACTS, TemplateSummarizer, facts_kept, tool_heavy_session
from talaria.agent.context import compaction as comp
from talaria.agent.context import tokens
from talaria.agent.context.compaction import (
    RECENT_SHARE,
    TAIL_SHARE,
    boundaries,
    compact,
    compact_session,
    cuts,
    recent_start,
)
from talaria.agent.context.stage1 import one_line, shrink_arguments, stage1
from talaria.agent.loop import run_turn
from talaria.agent.providers.errors import ContextOverflowError
from talaria.agent.store import Store
from tests.helpers import assert_pairs_complete, make_session, recorded

WINDOW = 200_000


@pytest.fixture(scope="module")
def big() -> list[dict]:
    return tool_heavy_session(120_000)


def run_compact(messages, **kw):
    kw.setdefault("window", WINDOW)
    kw.setdefault("tools", [])
    kw.setdefault("summarizer", TemplateSummarizer())
    return anyio.run(lambda: compact(messages, **kw))


def test_boundaries_keep_pairs_and_the_latest_user_message(big) -> None:
    head, tail = boundaries(big, 30_000)
    assert big[head - 1]["role"] == "user" and head == 2
    assert big[tail]["role"] != "tool"
    last_user = max(i for i, m in enumerate(big) if m["role"] == "user")
    assert tail <= last_user
    # A tiny budget still keeps the latest user message verbatim in the tail.
    _, tail = boundaries(big, 1)
    assert tail <= last_user and big[tail]["role"] != "tool"


def _turn(i: int, size: int = 50) -> list[dict]:
    """An assistant tool call and its (big) result."""
    return [{"role": "assistant", "content": "", "tool_calls": [
        {"id": f"c{i}", "name": "read_file", "arguments": json.dumps({"path": f"f{i}.py"})}]},
        {"role": "tool", "tool_call_id": f"c{i}", "name": "read_file",
         "content": json.dumps({"path": f"f{i}.py", "content": "x = 1\n" * size, "total_lines": size})}]


SYS, Q1, Q2 = ({"role": "system", "content": "s"}, {"role": "user", "content": "task one"},
               {"role": "user", "content": "task two"})
A1, A2 = {"role": "assistant", "content": "answer one"}, {"role": "assistant", "content": "answer two"}
CUT = {"role": "assistant", "content": "half an ans", "interrupted": True}


@pytest.mark.parametrize(("messages", "tail"), [
    ([SYS, Q1, *_turn(1), A1], 4),                            # finished: only the answer
    ([SYS, Q1, *_turn(1), A1, Q2, *_turn(2), A2], 8),         # earlier turns too
    ([SYS, Q1, *_turn(1), A1, Q2], 4),                        # pending question + answer before
    ([SYS, Q1, *_turn(1), A1, Q2, *_turn(2)], 4),             # cut short: question + its work
    ([SYS, Q1, *_turn(1), A1, Q2, *_turn(2), CUT], 4),        # cancelled mid-answer
    ([SYS, Q1, *_turn(1), Q2, *_turn(2)], 4),                 # no answer before the question
    ([SYS, Q1, *_turn(1)], 2),                                # the first task cut short
    ([SYS, Q1], 2),
])
def test_between_turns_the_tail_is_the_answer_and_any_pending_question(messages, tail) -> None:
    assert boundaries(messages, 10**9, between_turns=True) == (2, tail)
    # During a turn the same context keeps the live turn (from the latest user message on).
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    assert boundaries(messages, 10**9)[1] <= max(last_user, 2)


def test_compact_between_turns_takes_the_finished_turn() -> None:
    messages = [SYS, Q1, *_turn(1, size=20_000), A1]
    during = run_compact(messages, window=WINDOW, force_summary=True)
    # During a turn the turn is live: nothing of it is summarised, but its output older than
    # the verbatim tail becomes a one-liner.
    assert during.stage == 1 and during.messages[:3] == messages[:3] and during.messages[4] == A1
    assert during.messages[3]["content"].startswith("[read_file] read f1.py")
    result = run_compact(messages, window=WINDOW, force_summary=True, between_turns=True)
    assert result.progress and result.stage == 2 and result.dropped == (2, 4)
    assert result.messages[:2] == [SYS, Q1] and result.messages[-1] == A1
    assert result.messages[2]["content"].startswith(comp.SUMMARY_MARK)
    assert result.after < result.before / 10


@pytest.mark.parametrize("between_turns", [False, True])
@pytest.mark.parametrize("force", [False, True])
def test_totals_by_difference_equal_a_full_sizing(big, force: bool, between_turns: bool) -> None:
    """Counted before (as the loop counts before an automatic compaction), the totals are the
    counts, but for what compaction wrote (one-liners, the summary) and texts too short to
    cache, which are estimated."""
    tools = [{"name": "read_file", "description": "Read a file", "parameters": {"type": "object"}}]
    exact_before = tokens.count_messages(big, tools)
    result = run_compact(big, window=60_000, tools=tools, force_summary=force,
                         between_turns=between_turns)
    assert result.before == tokens.estimate_messages(big, tools)
    assert result.after == tokens.estimate_messages(result.messages, tools)
    assert result.before == pytest.approx(exact_before, rel=0.01)
    assert result.after == pytest.approx(tokens.count_messages(result.messages, tools), rel=0.2)


def test_compacting_what_was_never_counted_counts_nothing(big, monkeypatch) -> None:
    """A session loaded from the store, compacted at once: no text goes to the tokenizer
    (0.3 s for a 1M-token session); the figures are estimates, near the counts."""
    tokens.clear_cache()
    monkeypatch.setattr(tokens, "_count", lambda text: pytest.fail("counted a text"))
    for force in (False, True):
        result = run_compact(big, window=60_000, force_summary=force)
        assert result.progress and result.stage == (2 if force else 1)
    monkeypatch.undo()
    assert result.before == pytest.approx(tokens.count_messages(big), rel=0.2)
    assert result.after == pytest.approx(tokens.count_messages(result.messages), rel=0.2)


def test_figures_say_which_are_estimates(big) -> None:
    """A figure made of texts never counted says "about": before, when the context was not
    counted; after, when a summary (never counted) or a trimmed result is in it."""
    tokens.clear_cache()
    result = run_compact(big, window=60_000, force_summary=True)
    assert result.estimated == (True, True)
    assert comp.describe(result).startswith("Compacted the context from about ")
    tokens.count_messages(big)  # what the loop does before an automatic compaction
    result = run_compact(big, window=60_000, force_summary=True)
    assert result.estimated == (False, True)
    assert f"from {result.before:,} to about {result.after:,} tokens" in comp.describe(result)
    small = big[:2] + big[-4:]
    tokens.count_messages(small)
    result = run_compact(small, window=WINDOW)  # stage 1 leaves it as it is: all counted
    assert (result.stage, result.estimated) == (1, (False, False))


def test_stage1_keeps_head_and_tail_byte_identical(big) -> None:
    head, tail = boundaries(big, 30_000)
    reduced = stage1(big, head, tail)
    assert json.dumps(reduced[:head]) == json.dumps(big[:head])
    assert json.dumps(reduced[tail:]) == json.dumps(big[tail:])
    assert_pairs_complete(reduced)
    assert all(m["content"].startswith("[") for m in reduced[head:tail] if m["role"] == "tool")
    images = [p for m in reduced[head:tail] if isinstance(m.get("content"), list) for p in m["content"]]
    assert images and all(p["type"] == "text" for p in images)
    assert set(facts_kept(reduced)) == {f for _, f in FACTS}
    assert big[head + 1]["role"] == "tool" and not big[head + 1]["content"].startswith("[")  # no mutation


def test_one_line_summaries() -> None:
    out = json.dumps({"exit_code": 1, "output": "a\nb\nFAILED test_x - boom\n", "timed_out": False})
    assert one_line("terminal", {"command": "pytest"}, out) == \
        '[terminal] ran "pytest" -> exit 1, 3 lines; last line: "FAILED test_x - boom"'
    read = json.dumps({"path": "a.py", "content": "1|x\n2|y", "total_lines": 40})
    assert one_line("read_file", {"path": "a.py"}, read) == "[read_file] read a.py lines 1-2 of 40"
    assert one_line("patch", {}, json.dumps({"error": "no match"})).endswith("error: no match")
    assert one_line("weird", {}, "not json") == "[weird] -> 8 chars of output"


def test_shrunk_arguments_stay_valid_json() -> None:
    args = json.dumps({"path": "a.py", "content": "x" * 5000})
    shrunk = json.loads(shrink_arguments(args))
    assert shrunk["path"] == "a.py" and len(shrunk["content"]) < 400
    assert json.loads(shrink_arguments("{broken" + "y" * 2000))["_omitted_chars"] > 0


def test_duplicate_outputs_point_at_the_later_copy() -> None:
    same = json.dumps({"exit_code": 0, "output": "same output\n" * 20})
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    for i in range(3):
        messages += [{"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{i}", "name": "terminal", "arguments": '{"command": "ls"}'}]},
            {"role": "tool", "tool_call_id": f"c{i}", "name": "terminal", "content": same}]
    messages.append({"role": "user", "content": "next"})
    reduced = stage1(messages, 2, len(messages) - 1)
    assert "same output as a later" in reduced[3]["content"]
    assert reduced[7]["content"].startswith("[terminal] ran")


def test_stage1_alone_when_enough(big) -> None:
    result = run_compact(big)
    assert result.stage == 1 and result.progress and result.summary is None


def test_stage2_summary_head_tail_and_marking(big) -> None:
    summarizer = TemplateSummarizer()
    result = run_compact(big, window=60_000, summarizer=summarizer, focus="refunds", force_summary=True)
    assert result.stage == 2 and not result.fallback and result.progress
    head, tail = result.dropped
    assert result.messages[:head] == big[:head]
    note = result.messages[head]
    assert note["role"] == "user" and note["content"].startswith(comp.SUMMARY_MARK)
    assert "Reference material" in note["content"] and "## Goal" in note["content"]
    assert result.messages[-1] == big[-1], "the latest user message stays a live turn"
    assert_pairs_complete(result.messages)
    assert "focus on: refunds" in summarizer.calls[0][0]
    # A second compaction updates the previous summary rather than summarising it blindly.
    grown = result.messages + big[2:40] + [{"role": "user", "content": "and now?"}]
    again = run_compact(grown, window=60_000, summarizer=summarizer, force_summary=True)
    assert "previous summary" in summarizer.calls[-1][0]
    assert summarizer.calls[-1][1].count(comp.SUMMARY_MARK) == 1
    assert again.messages[again.dropped[0]]["content"].count(comp.SUMMARY_MARK) == 1


class Failing:
    def __init__(self, how: str) -> None:
        self.how = how

    async def summarize(self, instructions: str, transcript: str) -> str:
        if self.how == "raise":
            raise ConnectionError("summary model down")
        if self.how == "hang":
            await anyio.sleep(60)
        return "   "


@pytest.mark.parametrize("how", ["raise", "empty", "hang"])
def test_summary_failure_uses_a_marked_fallback(big, how: str, monkeypatch) -> None:
    monkeypatch.setattr(comp, "SUMMARY_TIMEOUT", 0.2)
    result = run_compact(big, window=60_000, summarizer=Failing(how), force_summary=True)
    assert result.stage == 2 and result.fallback and result.error
    note = result.messages[result.dropped[0]]["content"]
    assert "fallback summary" in note and "## User requests" in note
    assert "keep Python 3.9 compatibility" in note  # a constraint from the summarised middle
    assert "never touch the migrations/ folder" in result.messages[1]["content"]  # the head
    assert result.dropped[1] > result.dropped[0]


def test_no_progress_guard(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path, store=Store(tmp_path / "s.db"))
    session.append({"role": "user", "content": "short task"})
    session.summarizer = TemplateSummarizer()
    events = recorded(session)
    result = anyio.run(lambda: compact_session(session, force_summary=True))
    assert not result.progress
    assert events.of("Compacted")[0].applied is False
    assert session.context.stalled
    assert not comp.needs_compaction(session, used=10**9), "no loop until the context changes"
    assert "stopped" in comp.describe(result)


def test_auto_compaction_and_snapshot_survive_restore(fake_llm, tmp_path: Path, big) -> None:
    store = Store(tmp_path / "s.db")
    session = make_session(fake_llm, tmp_path, store=store, context_window=150_000)
    for message in big[1:]:
        session.append(message)
    fake_llm.script([{"text": "carrying on"}])
    events = recorded(session)
    assert anyio.run(run_turn, session, "go on") == "end_turn"
    [done] = events.of("Compacted")
    assert done.applied and done.after < done.before
    sent = fake_llm.requests[-1]["json"]["messages"]
    assert sum(len(json.dumps(m)) for m in sent) < sum(len(json.dumps(m)) for m in big) / 2
    # Nothing deleted: the transcript has everything plus the compaction event.
    transcript = store.messages(session.id)
    assert len(transcript) == 1 + (len(big) - 1) + 3  # system, big, prompt, event, reply
    event = next(m for m in transcript if m["role"] == "event")
    assert event["type"] == "compaction" and event["before_tokens"] > event["after_tokens"]
    # The live context after a restart is the compacted one plus what came after.
    assert store.context(session.id) == session.messages


def test_overflow_compacts_then_retries_once(fake_llm, tmp_path: Path, big) -> None:
    session = make_session(fake_llm, tmp_path, context_window=1_000_000)
    for message in big[1:-1]:
        session.append(message)
    fake_llm.script([
        {"fault": "context_overflow"},
        {"text": "## Goal\nfix refunds\n## Open work\n- tests"},   # the summary call
        {"text": "retried fine"},
    ])
    events = recorded(session)
    assert anyio.run(run_turn, session, "continue") == "end_turn"
    assert session.messages[-1]["content"] == "retried fine"
    assert events.of("Compacted")[0].stage == 2
    assert len(fake_llm.requests) == 3
    # Refused again after the retry: the turn ends, with the numbers (whether or not the
    # context needed compacting again; a refused summary call falls back to the transcript).
    fake_llm.script([{"fault": "context_overflow"}] * 3)
    with pytest.raises(ContextOverflowError, match="tokens were sent and the window is 128,000"):
        anyio.run(run_turn, session, "again")


def test_a_retried_summary_starts_over_and_streams_each_attempt(fake_llm, tmp_path: Path) -> None:
    """The pieces go to `on_text` as they come; a stream cut midway and retried leaves only the
    retry's text in the summary (the door replaces what it streamed with it)."""
    from talaria.agent.context.summarizer import ProviderSummarizer

    session = make_session(fake_llm, tmp_path)
    fake_llm.script([{"text": "## Goal\nhalf of it", "fault": "disconnect", "after_chunks": 2},
                     {"text": "## Goal\nthe whole summary"}])
    pieces: list[str] = []

    async def on_text(text: str) -> None:
        pieces.append(text)

    summary = anyio.run(ProviderSummarizer(session.provider).summarize, "summarize", "x", on_text)
    assert summary == "## Goal\nthe whole summary"
    assert "".join(pieces).endswith("## Goal\nthe whole summary") and len("".join(pieces)) > len(summary)


def _ask_with_image() -> dict:
    return {"role": "user", "content": [{"type": "text", "text": "Continue: what does this show?"},
                                        {"type": "image", "mime_type": "image/png", "data": "iVBOR"}]}


@pytest.mark.parametrize("window", [30_000, 60_000, 200_000])
@pytest.mark.parametrize("force", [False, True])
def test_during_a_turn_nothing_protected_is_lost(big, window: int, force: bool) -> None:
    """Head, pending ask (its image too), the verbatim tail byte for byte, and every user and
    assistant text of the recent turns kept as messages: whatever the window and the stage."""
    messages = [*big[:-1], _ask_with_image()]
    result = run_compact(messages, window=window, force_summary=force)
    assert result.progress
    out = result.messages
    assert out[:2] == messages[:2], "the head"
    assert out[-1] == messages[-1], "the pending ask, with its image"
    head, kept, verbatim = cuts(messages, window)
    if result.stage == 2:
        assert result.dropped == (head, kept)
    tail = len(messages) - verbatim
    assert json.dumps(out[-tail:]) == json.dumps(messages[-tail:]), "the verbatim tail"
    assert _said(out[-(len(messages) - kept):]) == _said(messages[kept:]), "the recent turns' words"
    assert_pairs_complete(out)


def _said(messages: list[dict]) -> list[tuple[str, list[str]]]:
    """What the user and the assistant wrote (images and tool-call arguments aside)."""
    def texts(content) -> list[str]:
        if isinstance(content, str):
            return [content]
        return [p["text"] for p in content if p["type"] == "text" and p["text"] != "[image omitted]"]

    return [(m["role"], texts(m["content"])) for m in messages if m["role"] in ("user", "assistant")]


def test_the_tail_budgets_are_hit(big) -> None:
    """The verbatim tail holds TAIL_SHARE of the window, the recent turns RECENT_SHARE: one
    message more would pass the budget (the first may pass it: an assistant message goes with
    its tool results)."""
    head, kept = boundaries(big, int(WINDOW * RECENT_SHARE))
    verbatim = recent_start(big, head, int(WINDOW * TAIL_SHARE))
    assert head < kept < verbatim < len(big)
    for start, share in ((verbatim, TAIL_SHARE), (kept, RECENT_SHARE)):
        count = tokens.count_messages
        assert count(big[start + 1:]) <= WINDOW * share < count(big[start - 1:])


def test_a_long_turn_shrinks_its_own_old_outputs() -> None:
    """One prompt (with an image), then a hundred big reads: automatic compaction during that
    turn summarises nothing of it (it is live) yet makes progress, the prompt keeps its image
    and the newest outputs stay verbatim."""
    turn = [m for i in range(100) for m in _turn(i, size=400)]
    messages = [SYS, Q1, {"role": "assistant", "content": "On it."}, _ask_with_image(), *turn]
    result = run_compact(messages, window=20_000)
    assert result.progress and result.stage == 1 and result.after < result.before / 2
    out = result.messages
    assert out[:4] == messages[:4] and len(out) == len(messages)
    assert out[5]["content"].startswith("[read_file] read f0.py")
    assert out[-1] == messages[-1] and out[-2] == messages[-2]
    assert_pairs_complete(out)
