"""Trajectory compression: budget met, protected turns byte-identical, tool pairs intact,
failures kept, metrics beside the output; end to end through the CLI with the fake LLM."""

from __future__ import annotations

import json
import os
import random
import string
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from talaria.agent.context import tokens
from talaria.agent.trajectories.compress.api import CompressOptions, compress_file, metrics_path
from talaria.agent.trajectories.compress.plan import SUMMARY_PREFIX, plan
from tests import ROOT
from tests.fakellm import FakeLLM

TARGET = 3_000
OPTIONS = CompressOptions(target_tokens=TARGET, summary_tokens=200, protect_last=4, workers=1)


def words(rng: random.Random, n: int) -> str:
    return " ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 8)))
                    for _ in range(n))


def call(name: str, **arguments: Any) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def trajectory(seed: int, steps: int = 20, size: int = 120, parallel: bool = False) -> dict:
    """system, human, then `steps` x (gpt with 1-2 tool calls, their tool turns), final gpt."""
    rng = random.Random(seed)
    turns = [{"from": "system", "value": "You are a helpful agent. " + words(rng, 40)},
             {"from": "human", "value": "Fix the bug. " + words(rng, 30)}]
    for step in range(steps):
        calls = 2 if parallel and step % 3 == 1 else 1
        turns.append({"from": "gpt", "value": f"step {step}\n" + "\n".join(
            call("terminal", command=f"cat f{step}_{i}") for i in range(calls))})
        turns += [{"from": "tool", "value": f"<tool_response>{words(rng, size)}</tool_response>"}
                  for _ in range(calls)]
    turns.append({"from": "gpt", "value": "All done. " + words(rng, 20)})
    return {"id": f"traj-{seed}", "conversations": turns}


def total_tokens(conversation: list[dict]) -> int:
    return sum(tokens.count(t["value"]) for t in conversation)


def assert_pairs_intact(conversation: list[dict]) -> None:
    """Every gpt turn with k tool calls is followed by exactly k tool turns, and every tool
    turn answers one."""
    i = 0
    while i < len(conversation):
        turn = conversation[i]
        assert turn["from"] != "tool", f"tool turn {i} without its call"
        k = turn["value"].count("<tool_call>") if turn["from"] == "gpt" else 0
        following = conversation[i + 1: i + 1 + k]
        assert [t["from"] for t in following] == ["tool"] * k, f"turn {i} lost a response"
        i += 1 + k


class Summarizer:
    def __init__(self, reply: str = "The agent read files and found the bug.", *,
                 fail: Exception | None = None, hang: bool = False) -> None:
        self.reply, self.fail, self.hang = reply, fail, hang
        self.calls: list[tuple[str, str]] = []

    async def summarize(self, instructions: str, transcript: str) -> str:
        self.calls.append((instructions, transcript))
        if self.hang:
            await anyio.sleep(60)
        if self.fail:
            raise self.fail
        return self.reply


def run(tmp_path: Path, entries: list[Any], summarizer: Any, options: CompressOptions = OPTIONS,
        raw: list[str] | None = None) -> tuple[list[str], list[str], dict]:
    source = tmp_path / "in.jsonl"
    lines = raw if raw is not None else [json.dumps(e) + "\n" for e in entries]
    source.write_text("".join(lines), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    report = compress_file(source, out, options, summarizer=summarizer)
    assert json.loads(metrics_path(out).read_text()) == report
    return lines, out.read_text(encoding="utf-8").splitlines(keepends=True), report


def test_budget_met_protected_turns_identical_pairs_intact(tmp_path: Path) -> None:
    small = trajectory(0, steps=2, size=20)
    bigs = [trajectory(seed, parallel=True) for seed in (1, 2, 3)]
    assert total_tokens(small["conversations"]) < TARGET
    assert all(total_tokens(b["conversations"]) > 2 * TARGET for b in bigs)
    summarizer = Summarizer()
    lines, out, report = run(tmp_path, [small, *bigs], summarizer)

    assert out[0] == lines[0]  # under the target: byte-identical
    for big, line, metrics in zip(bigs, out[1:], report["trajectories"][1:], strict=True):
        before, after = big["conversations"], json.loads(line)["conversations"]
        assert total_tokens(after) <= TARGET
        assert metrics["compressed_tokens"] == total_tokens(after)
        assert not metrics["still_over_limit"] and metrics["compressed"]
        # First system, human, gpt, tool turns and the last 4: exactly as they were.
        assert json.dumps(after[:4]) == json.dumps(before[:4])
        assert json.dumps(after[-4:]) == json.dumps(before[-4:])
        summaries = [t for t in after if t["value"].startswith(SUMMARY_PREFIX)]
        assert len(summaries) == 1 and summaries[0]["from"] == "human"
        assert tokens.count(summaries[0]["value"]) <= OPTIONS.summary_tokens
        assert_pairs_intact(after)
        start, end = metrics["span"]
        assert after[start] == summaries[0] and before[end:] == after[start + 1:]
        assert metrics["turns_removed"] == len(before) - len(after)
        assert json.loads(line)["id"] == big["id"]  # the rest of the entry is kept
    aggregate = report["aggregate"]
    assert (aggregate["trajectories"], aggregate["compressed"], aggregate["skipped_under_target"],
            aggregate["still_over_limit"], aggregate["summarization_errors"]) == (4, 3, 1, 0, 0)
    assert 0 < aggregate["compression_ratio"] < 1
    assert len(summarizer.calls) == 3
    instructions, transcript = summarizer.calls[0]
    assert "200 tokens" in instructions and "[Turn" in transcript


def test_smallest_span_is_chosen_and_never_starts_on_a_tool_turn() -> None:
    rng = random.Random(7)
    turns = trajectory(5, steps=12, size=30)["conversations"]
    big = 3 + 2 * 6  # the tool turn of step 6
    turns[big] = {"from": "tool", "value": words(rng, 4000)}
    result = plan(turns, tokens.count, target=TARGET, summary_tokens=200, protect_last=4)
    # The one huge tool response and its call: two turns replace enough.
    assert result.span == (big - 1, big + 1)
    assert result.reaches_target


def test_failed_and_timed_out_summaries_keep_the_line(tmp_path: Path) -> None:
    entries = [trajectory(11), trajectory(12)]
    for summarizer, expect in ((Summarizer(fail=RuntimeError("model down")), "model down"),
                               (Summarizer(hang=True), "timed out")):
        options = CompressOptions(target_tokens=TARGET, summary_tokens=200, workers=1,
                                  summary_timeout=0.2)
        _, out, report = run(tmp_path, entries, summarizer, options)
        assert len(out) == 2
        for line, metrics in zip(out, report["trajectories"], strict=True):
            after = json.loads(line)["conversations"]
            summary = next(t["value"] for t in after if t["value"].startswith(SUMMARY_PREFIX))
            assert "fallback summary" in summary and expect in summary
            assert "terminal x" in summary  # built from the removed turns themselves
            assert metrics["summary_fallback"] and metrics["summarization_errors"] == 1
            assert total_tokens(after) <= TARGET and not metrics["still_over_limit"]
            assert_pairs_intact(after)
        assert report["aggregate"]["summarization_errors"] == 2


def test_protected_turns_over_target_are_kept(tmp_path: Path) -> None:
    rng = random.Random(3)
    huge_ask = trajectory(21, steps=3, size=20)
    huge_ask["conversations"][1]["value"] = words(rng, 5000)  # the first human turn alone
    raw = [json.dumps(huge_ask) + "\n", "\n"]
    _, out, report = run(tmp_path, [], Summarizer(), raw=raw)
    assert out[1:] == raw[1:]  # a blank line passed through
    first = report["trajectories"][0]
    assert first["still_over_limit"]
    assert json.loads(out[0])["conversations"][:2] == huge_ask["conversations"][:2]
    aggregate = report["aggregate"]
    assert (aggregate["trajectories"], aggregate["still_over_limit"]) == (1, 1)


def test_junk_lines_are_refused_before_any_work(tmp_path: Path) -> None:
    """Issue 28: a line that is not a trajectory is named (as export names it), and nothing is
    written: a verbatim copy would pass for a compressed file."""
    raw = [json.dumps(trajectory(21, steps=3, size=20)) + "\n", "not json\n",
           json.dumps({"no": "conversations"}) + "\n", "[1, 2]\n"]
    summarizer = Summarizer()
    with pytest.raises(ValueError, match=r"3 of 4 line\(s\) cannot be read as trajectories \(line 2: "
                                         r"not JSON .*; line 3: .*; line 4: .*\); nothing was written"):
        run(tmp_path, [], summarizer, raw=raw)
    assert not (tmp_path / "out.jsonl").exists() and not summarizer.calls


def test_cli_with_the_configured_summary_model_and_worker_processes(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(trajectory(s)) + "\n" for s in range(6)))
    out = tmp_path / "out" / "small.jsonl"
    with FakeLLM() as llm:
        llm.default_turn = {"text": "[CONTEXT SUMMARY]: The agent listed files f0 to f9."}
        env = {**os.environ, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": llm.openai_base_url,
               "TALARIA_HOME": str(tmp_path / "home"), "TALARIA_SUMMARY_MODEL": "openai:fake"}
        done = subprocess.run(
            [sys.executable, "-m", "talaria.acp_server.cli.batch", "trajectories", "compress",
             str(source), "-o", str(out), "--target-tokens", str(TARGET), "--summary-tokens",
             "200", "--workers", "2"], env=env, cwd=ROOT, capture_output=True, text=True,
            timeout=60)
        assert done.returncode == 0, done.stderr
        assert len(llm.requests) == 6
    lines = out.read_text().splitlines()
    assert len(lines) == 6
    for line in lines:
        after = json.loads(line)["conversations"]
        assert total_tokens(after) <= TARGET
        summary = next(t["value"] for t in after if t["value"].startswith(SUMMARY_PREFIX))
        assert summary == SUMMARY_PREFIX + "The agent listed files f0 to f9."  # one prefix
    report = json.loads((tmp_path / "out" / "small.metrics.json").read_text())
    assert report["aggregate"]["compressed"] == 6
    assert "6 compressed" in done.stderr


def test_bad_options_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="target-tokens"):
        CompressOptions(target_tokens=100, summary_tokens=200).check()
    with pytest.raises(ValueError, match="no such file"):
        compress_file(tmp_path / "missing.jsonl", tmp_path / "o.jsonl", OPTIONS,
                      summarizer=Summarizer())


def test_hugging_face_tokenizer_file(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    from talaria.agent.trajectories.compress.api import make_counter

    vocab = {"[UNK]": 0, "hello": 1, "world": 2}
    model = tokenizers.models.WordLevel(vocab, unk_token="[UNK]")
    tokenizer = tokenizers.Tokenizer(model)
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    assert make_counter(str(path))("hello world hello there") == 4
    with pytest.raises(ValueError, match="--tokenizer"):
        make_counter(str(tmp_path / "nope"))
