"""Token counts on the event loop are an upper bound that never builds the tokenizer; the
compaction decision is still the one an exact count makes (issue 9: no long GIL holds)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.synthetic import TemplateSummarizer
from talaria.agent.context import compaction as comp
from talaria.agent.context import tokens
from talaria.agent.loop import run_turn
from talaria.agent.prompt import flattened
from tests import ROOT
from tests.helpers import make_session, recorded

# Texts that tokenize densely (few bytes per token), where a bytes/4 estimate undercounts.
DENSE = ["1234567890" * 300, "漢字仮名交じり文" * 200, "🙂🚀✨" * 300, "\x00\x01\x02" * 300,
         "{[()]};<>!?" * 300, "\n" * 2000, " \t" * 1000, "x" * 5000, "aé" * 1000,
         bytes(range(256)).decode("latin-1") * 20, "word " * (tokens.EXACT_LIMIT // 5 + 1)]
texts = st.text(max_size=3000) | st.sampled_from(DENSE)


@settings(max_examples=300, deadline=None)
@given(texts)
def test_the_bound_never_undercounts(text: str) -> None:
    assert tokens.bound(text) >= tokens._count(text)


def test_dense_texts_bounded_and_exact_once_cached() -> None:
    tokens.clear_cache()
    # A quarter of the bytes, tokens' usual estimate, would undercount some of them.
    assert any(tokens._count(text) > len(text.encode()) // 4 for text in DENSE)
    for text in DENSE:
        assert tokens.bound(text) >= tokens._count(text)
        exact = tokens.count(text)  # now cached: the bound is the count itself
        assert tokens.bound(text) == exact


message = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "tool"]),
                                 "content": texts | st.lists(st.one_of(
                                     st.builds(lambda t: {"type": "text", "text": t}, texts),
                                     st.just({"type": "image", "data": "AAAA"})), max_size=3)},
                                optional={"tool_calls": st.lists(st.fixed_dictionaries(
                                    {"name": st.text(max_size=20), "arguments": texts}), max_size=2)})


@settings(max_examples=100, deadline=None)
@given(st.lists(message, max_size=6), st.lists(st.fixed_dictionaries({"name": st.text(max_size=30)}),
                                               max_size=3))
def test_a_request_bound_never_undercounts(messages: list[dict], tools: list[dict]) -> None:
    assert tokens.bound_messages(messages, tools) >= tokens.count_messages(messages, tools)


def test_the_bound_never_loads_tiktoken() -> None:
    code = ("import sys\nfrom talaria.agent.context import tokens\n"
            "print(tokens.bound_messages([{'role': 'user', 'content': 'hello ' * 50000}], [{'name': 't'}]))\n"
            "print('tiktoken' in sys.modules)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(tokens.MESSAGE_OVERHEAD + 300_000 + len('[{"name":"t"}]')), "False"]


WINDOW = 10_000  # compact_threshold 0.8: compaction from 8,000 tokens
CHEAP = "word " * 2_000  # 10,000 bytes (over the threshold as a bound), ~2,000 tokens
DEAR = "word " * 9_000  # ~9,000 tokens: over it for real


def _session(fake_llm, tmp_path: Path):
    session = make_session(fake_llm, tmp_path, context_window=WINDOW)
    session.summarizer = TemplateSummarizer()
    return session, recorded(session)


def test_a_bound_over_the_threshold_alone_does_not_compact(fake_llm, tmp_path: Path) -> None:
    session, events = _session(fake_llm, tmp_path)
    tokens.clear_cache()
    assert tokens.bound(CHEAP) >= WINDOW * session.compact_threshold > tokens._count(CHEAP) * 2
    fake_llm.script([{"text": "read it"}])
    assert anyio.run(run_turn, session, CHEAP) == "end_turn"
    assert not events.of("Compacted")
    assert fake_llm.requests[-1]["json"]["messages"][-1]["content"] == CHEAP  # sent whole


def test_an_exact_count_over_the_threshold_compacts(fake_llm, tmp_path: Path) -> None:
    session, events = _session(fake_llm, tmp_path)
    for i in range(6):
        session.append({"role": "user", "content": f"earlier task {i}: " + "note " * 300})
        session.append({"role": "assistant", "content": f"done {i}"})
    fake_llm.script([{"text": "read it"}])
    assert anyio.run(run_turn, session, DEAR) == "end_turn"
    assert events.of("Compacted"), "the exact count reached the threshold"


def test_compact_if_needed_decides_on_the_exact_count(fake_llm, tmp_path: Path) -> None:
    session, events = _session(fake_llm, tmp_path)
    tokens.clear_cache()
    session.append({"role": "user", "content": CHEAP})
    bound = session.context.bound(session.tool_definitions())
    assert comp.needs_compaction(session, bound)
    assert anyio.run(comp.compact_if_needed, session, bound) is None
    exact = tokens.count_messages(session.messages, session.tool_definitions())
    assert session.context.bound(session.tool_definitions()) == exact < bound, \
        "the loop's running total was a bound: the exact count replaced it"
    assert not events.of("Compacted")
    # Under the threshold as a bound: nothing is counted exactly at all.
    assert anyio.run(comp.compact_if_needed, session, 10) is None


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab \n\t\u00a0é"), max_size=400), st.integers(1, 120))
def test_flattened_is_the_whitespace_squeezed_prefix(text: str, limit: int) -> None:
    assert flattened(text, limit) == " ".join(text.split())[:limit]
