"""What precedes success: tool-call n-grams of solved vs unsolved attempts and repeated tool
errors, in statistics.json and on the batch page. The score against hand-computed values, the
message normalisation on variants, and a real run with the fake LLM."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from talaria.agent.trajectories.batch import sequences
from talaria.agent.trajectories.batch.runner import BatchOptions, run_batch
from talaria.agent.trajectories.report import load_batch, render_batch
from tests.batchllm import RoutedLLM, prompt_of, tool_results


def test_the_score_is_the_smoothed_log_odds_ratio() -> None:
    # 3 of 4 solved attempts hold it, 0 of 4 unsolved: ln(3.5/1.5) - ln(0.5/4.5).
    score, z = sequences.log_odds(3, 4, 0, 4)
    assert score == pytest.approx(math.log(3.5 / 1.5) - math.log(0.5 / 4.5))
    assert score == pytest.approx(3.0445, abs=1e-4)
    assert z == pytest.approx(score / math.sqrt(1 / 3.5 + 1 / 1.5 + 1 / 0.5 + 1 / 4.5))
    assert sequences.log_odds(2, 4, 2, 4) == (0.0, 0.0)  # as common on both sides
    assert sequences.log_odds(0, 4, 3, 4)[0] == pytest.approx(-score)  # symmetric


def test_ngrams_are_one_to_three_consecutive_calls() -> None:
    assert sequences.ngrams(["a", "b", "a"]) == {
        ("a",), ("b",), ("a", "b"), ("b", "a"), ("a", "b", "a")}
    assert sequences.ngrams([]) == set()


@pytest.mark.parametrize(("message", "shape"), [
    ("File not found: missing-17.txt", "File not found: <path>"),
    ("File not found: /tmp/pytest-of-u/ws3/src/app.py", "File not found: <path>"),
    ("offset 120 is past the end of the file (30 lines)",
     "offset <n> is past the end of the file (<n> lines)"),
    ("no process 3f2a9c1e0b7d4e21 (exited)", "no process <id> (exited)"),
    ("session 0b7a2c4e-8f1d-4c2b-9e3a-5d6f7a8b9c0d not found", "session <id> not found"),
    ("command timed out after 2.5s\n\n  at   ./run.sh", "command timed out after <n>s at <path>"),
])
def test_error_messages_are_normalised(message: str, shape: str) -> None:
    assert sequences.normalise(message) == shape


def test_a_normalised_message_is_cut() -> None:
    assert len(sequences.normalise("word " * 200)) == sequences.MESSAGE_CHARS


def route(body: dict) -> dict:
    """"good N": writes out.txt, reads it back. "bad N": reads two files that are not there."""
    prompt, results = prompt_of(body), tool_results(body)
    n = prompt.split()[-1]
    if prompt.startswith("good"):
        steps = [("write_file", {"path": "out.txt", "content": "ok"}), ("read_file", {"path": "out.txt"})]
    else:
        steps = [("read_file", {"path": f"missing-{n}.txt"}), ("read_file", {"path": f"gone/{n}/x.py"})]
    if len(results) < len(steps):
        name, args = steps[len(results)]
        return {"tool_calls": [{"name": name, "arguments": args}]}
    return {"text": "done"}


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[RoutedLLM]:
    (tmp_path / "home").mkdir()
    with RoutedLLM(route) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("TALARIA_HOME", str(tmp_path / "home"))
        yield server


def test_a_run_lists_what_precedes_success_and_the_errors_that_repeat(llm: RoutedLLM, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    rows = [{"id": f"{kind}{i}", "prompt": f"{kind} {i}", "check": 'test "$(cat out.txt)" = ok'}
            for kind in ("good", "bad") for i in range(4)]
    rows.append({"id": "unchecked", "prompt": "bad 9"})  # its errors count, its calls do not
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = run_batch(BatchOptions(tasks_file=tasks, run_name="seq", output_dir=tmp_path / "data",
                                    workers=2, model="openai:fake"), progress_out=None)
    stats = json.loads((result.run_dir / "statistics.json").read_text())
    seq = stats["sequences"]
    assert (seq["solved_trajectories"], seq["unsolved_trajectories"]) == (4, 4)
    ahead = {tuple(r["ngram"]): r for r in seq["solved"]}
    behind = {tuple(r["ngram"]): r for r in seq["unsolved"]}
    assert set(ahead) == {("write_file",), ("write_file", "read_file")}
    assert set(behind) == {("read_file", "read_file")}
    top = ahead[("write_file",)]
    assert (top["solved"], top["unsolved"], top["solved_share"], top["unsolved_share"]) == (4, 0, 1.0, 0.0)
    score, z = sequences.log_odds(4, 4, 0, 4)
    assert (top["score"], top["z"]) == (round(score, 4), round(z, 3))
    # read_file alone is in every attempt: no signal, listed on neither side.
    assert ("read_file",) not in ahead and ("read_file",) not in behind

    (error,) = stats["tool_errors"]
    assert error["tool"] == "read_file" and error["message"] == "File not found: <path>"
    assert (error["count"], error["trajectories"]) == (10, 5)  # 2 per bad attempt, 5 of them
    assert error["example"].startswith("File not found: ") and error["task_id"].startswith(("bad", "unchecked"))

    page = render_batch(*load_batch(result.run_dir))
    assert "What precedes success" in page and "write_file → read_file" in page
    assert "Tool errors that repeat" in page and "File not found: &lt;path&gt;" in page


def test_lines_without_verdicts_or_with_one_verdict_list_no_sequences() -> None:
    acc = sequences.Sequences()
    for _ in range(5):
        acc.add({"task_id": "t", "resolved": True, "messages": [
            {"role": "assistant", "content": "", "tool_calls": [{"id": "1", "name": "terminal", "arguments": "{}"}]},
            {"role": "tool", "tool_call_id": "1", "name": "terminal", "status": "failed",
             "content": json.dumps({"error": "exit 3 in /srv/app"})}]})
    out = acc.to_dict()
    assert out["sequences"]["solved"] == [] and out["sequences"]["unsolved_trajectories"] == 0
    assert out["tool_errors"][0] | {"example": None} == {
        "tool": "terminal", "message": "exit <n> in <path>", "count": 5, "trajectories": 5,
        "example": None, "task_id": "t"}
