"""Verified batch tasks end to end: real worker processes, the fake LLM on loopback, real
checks run in each task's workspace after its agent.

Covers the check's verdict (exit status, reward.txt, reward.json, a bad reward, a timeout),
tests the agent never sees, attempts with pass@k and their resume, cost from the price
table and `--max-cost`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from talaria.agent.trajectories.batch.runner import BatchOptions, run_batch
from talaria.agent.trajectories.batch.verdicts import pass_at_k
from talaria.agent.trajectories.export.sharegpt import parse_sharegpt
from tests.batchllm import RoutedLLM, prompt_of, script_turn, tool_results

PRICE_IN, PRICE_OUT = 3.0, 15.0
"""Dollars per million tokens of `openai:fake` in these tests' config.toml."""


def write_tasks(path: Path, tasks: list[dict]) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks), encoding="utf-8")
    return path


def lines(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "trajectories.jsonl").read_text().splitlines()]


def route(body: dict) -> dict:
    """"peek": lists the workspace and /tests (the tests must not be there yet)."""
    if prompt_of(body) == "peek":
        if not tool_results(body):
            return {"tool_calls": [{"name": "terminal", "arguments": {
                "command": "ls -a; ls -a .talaria-verifier /tests 2>&1; echo listed"}}]}
        return {"text": "done"}
    return script_turn(body)


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[prices."openai:fake"]\ninput = {PRICE_IN}\noutput = {PRICE_OUT}\n')
    with RoutedLLM(route) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("TALARIA_HOME", str(home))
        yield server


def test_checks_give_each_task_its_verdict(llm: RoutedLLM, tmp_path: Path) -> None:
    tests = tmp_path / "hidden"
    tests.mkdir()
    (tests / "secret.txt").write_text("the answer\n")
    tasks = write_tasks(tmp_path / "tasks.jsonl", [
        {"id": "ok", "prompt": "write out.txt hello", "tags": ["files", "easy"],
         "check": {"command": 'test "$(cat out.txt)" = "$WANT"', "env": {"WANT": "hello"}}},
        {"id": "wrong", "prompt": "write out.txt goodbye", "tags": ["files"],
         "check": 'echo "found: $(cat out.txt)"; test "$(cat out.txt)" = hello'},
        {"id": "half", "prompt": "write out.txt x",
         "check": "echo 0.5 > /logs/verifier/reward.txt; exit 3"},
        {"id": "json", "prompt": "write out.txt x",
         "check": 'echo \'{"reward": 0.25, "lines": 1}\' > "$VERIFIER_DIR/reward.json"'},
        {"id": "bad-reward", "prompt": "write out.txt x",
         "check": "echo maybe > /logs/verifier/reward.txt"},
        {"id": "slow", "prompt": "write out.txt x", "check": {"command": "sleep 30", "timeout": 1}},
        {"id": "peek", "prompt": "peek", "tests": "hidden",
         "check": "cat /tests/secret.txt && test -f \"$TEST_DIR/secret.txt\""},
        {"id": "unchecked", "prompt": "write out.txt x"},
        # An agent that plants a reward where the check's would go gains nothing.
        {"id": "cheat", "prompt": "write .talaria-verifier/logs/verifier/reward.txt 1",
         "check": "exit 1"},
    ])
    result = run_batch(BatchOptions(tasks_file=tasks, run_name="v", output_dir=tmp_path / "data",
                                    workers=3, model="openai:fake"), progress_out=None)
    got = {r["task_id"]: r for r in lines(result.run_dir)}
    assert all(r["status"] == "completed" for r in got.values()), got
    verdict = {k: (r["reward"], r["resolved"], (r["verifier"] or {}).get("source"))
               for k, r in got.items()}
    assert verdict == {
        "ok": (1.0, True, "exit_status"), "wrong": (0.0, False, "exit_status"),
        "half": (0.5, False, "reward.txt"), "json": (0.25, False, "reward.json"),
        "bad-reward": (0.0, False, None), "slow": (0.0, False, None),
        "peek": (1.0, True, "exit_status"), "unchecked": (None, None, None),
        "cheat": (0.0, False, "exit_status")}
    assert got["wrong"]["verifier"]["output_tail"] == "found: goodbye\n"
    assert got["wrong"]["verifier"]["exit_code"] == 1
    assert "not a number" in got["bad-reward"]["verifier"]["error"]
    assert "timed out after 1s" in got["slow"]["verifier"]["error"]
    assert got["peek"]["verifier"]["output_tail"].startswith("the answer")
    listing = json.loads(parse_sharegpt(got["peek"])[3]["content"])["output"]
    assert listing.startswith(".\n..\n")  # an empty workspace, and no tests anywhere yet:
    assert "'.talaria-verifier': No such file" in listing and "'/tests': No such file" in listing
    assert got["ok"]["tags"] == ["files", "easy"] and got["ok"]["attempt"] == 1
    checkpoint = json.loads((result.run_dir / "checkpoint.json").read_text())
    assert checkpoint["rewards"]["half"] == 0.5 and "unchecked" not in checkpoint["rewards"]
    assert sorted(checkpoint["resolved"]) == ["ok", "peek"]

    stats = json.loads((result.run_dir / "statistics.json").read_text())["verification"]
    assert (stats["attempts"], stats["resolved"], stats["unchecked_attempts"]) == (8, 2, 1)
    assert stats["pass_at"] == {"1": round(2 / 8, 6)}
    assert stats["verifier_errors"] == 2
    assert stats["reward"]["mean"] == round(2.75 / 8, 6)
    assert stats["by_tag"]["files"]["resolved"] == 1 and stats["by_tag"]["easy"]["attempts"] == 1
    assert stats["by_model"]["openai:fake"]["attempts"] == 8
    assert stats["by_toolset"]["core"]["tasks"] == 8
    # Cost: every call priced at openai:fake's price, summed over the run.
    for record in got.values():
        tokens = record["tokens"]
        expected = (tokens["input"] * PRICE_IN + tokens["output"] * PRICE_OUT) / 1e6
        assert record["cost_usd"] == pytest.approx(expected, abs=1e-6)
    total = sum(r["cost_usd"] for r in got.values())
    assert stats["cost_usd"]["total"] == pytest.approx(total, abs=1e-5)
    assert stats["cost_usd"]["per_solved_task"] == pytest.approx(total / 2, abs=1e-5)


def test_attempts_pass_at_k_and_resume_per_attempt(llm: RoutedLLM, tmp_path: Path) -> None:
    firsts: list[str] = []

    def flaky(body: dict) -> dict:
        prompt = prompt_of(body)
        if prompt == "write out.txt coin" and not tool_results(body):
            firsts.append(prompt)
            text = "hello" if len(firsts) % 2 == 1 else "tails"  # attempts 1, 3, ... solve
            return {"tool_calls": [{"name": "write_file",
                                    "arguments": {"path": "out.txt", "content": text}}]}
        return script_turn(body)

    llm.route = flaky
    check = 'test "$(cat out.txt)" = hello'
    tasks = write_tasks(tmp_path / "tasks.jsonl", [
        {"id": "coin", "prompt": "write out.txt coin", "check": check},
        {"id": "always", "prompt": "write out.txt hello", "check": check},
        {"id": "never", "prompt": "write out.txt nope", "check": check},
        {"id": "second", "prompt": "write out.txt hello",  # the check knows its attempt
         "check": 'test "$TALARIA_ATTEMPT" = 2 && test "$TALARIA_TASK_ID" = second'},
    ])
    options = BatchOptions(tasks_file=tasks, run_name="k", output_dir=tmp_path / "data",
                           workers=1, model="openai:fake", attempts=3)
    result = run_batch(options, progress_out=None)
    assert (result.total, result.ran) == (12, 12)
    records = lines(result.run_dir)
    assert [(r["task_id"], r["attempt"]) for r in records[:4]] == [
        ("coin", 1), ("always", 1), ("never", 1), ("second", 1)]  # first attempts first
    coin = [r["resolved"] for r in sorted(records, key=lambda r: r["attempt"]) if r["task_id"] == "coin"]
    assert coin == [True, False, True]
    stats = json.loads((result.run_dir / "statistics.json").read_text())["verification"]
    second = [r["resolved"] for r in sorted(records, key=lambda r: r["attempt"]) if r["task_id"] == "second"]
    assert second == [False, True, False]
    for k in (1, 2, 3):
        expected = sum(pass_at_k(3, c, k) for c in (2, 3, 0, 1)) / 4
        assert stats["pass_at"][str(k)] == round(expected, 6)
    assert stats["pass_at"] == {"1": 0.5, "2": round(2 / 3, 6), "3": 0.75}
    per_task = stats["per_task"]["coin"]
    assert (per_task["attempts"], per_task["resolved"]) == (3, 2)
    assert per_task["reward_mean"] == round(2 / 3, 6)
    assert per_task["reward_std"] == round((1 / 3) ** 0.5, 6)  # sample std of 1, 0, 1
    assert stats["by_attempt"]["2"] == {"attempts": 4, "reward_mean": 0.5, "resolved_rate": 0.5}
    checkpoint = json.loads((result.run_dir / "checkpoint.json").read_text())
    assert sorted(checkpoint["completed"])[:3] == ["always", "always#2", "always#3"]
    assert {"coin", "coin#3", "second#2"} <= set(checkpoint["resolved"])
    assert "coin#2" not in checkpoint["resolved"] and checkpoint["rewards"]["coin#2"] == 0.0

    # A fourth attempt each: --resume with more attempts runs only the new ones.
    llm.prompts.clear()
    again = run_batch(BatchOptions(tasks_file=tasks, run_name="k", output_dir=tmp_path / "data",
                                   workers=2, resume=True, attempts=4), progress_out=None)
    assert again.ran == 4 and sorted(set(llm.prompts)) == [
        "write out.txt coin", "write out.txt hello", "write out.txt nope"]
    final = lines(again.run_dir)
    keys = [(r["task_id"], r["attempt"]) for r in final]
    assert len(keys) == len(set(keys)) == 16
    stats = json.loads((again.run_dir / "statistics.json").read_text())["verification"]
    assert set(stats["pass_at"]) == {"1", "2", "3", "4"}
    # Resumed without --attempts: the checkpoint's 4 stand, nothing is left to run.
    assert run_batch(BatchOptions(tasks_file=tasks, run_name="k", output_dir=tmp_path / "data",
                                  resume=True), progress_out=None).ran == 0


def test_max_cost_stops_the_turn(llm: RoutedLLM, tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [
        {"id": "pricey", "prompt": "write out.txt hello", "check": "test -f out.txt"}])
    result = run_batch(BatchOptions(tasks_file=tasks, run_name="c", output_dir=tmp_path / "data",
                                    workers=1, model="openai:fake", max_cost=1e-9),
                       progress_out=None)
    (record,) = lines(result.run_dir)
    assert (record["status"], record["reason"]) == ("failed", "cost_limit")
    assert record["turns"] == 1 and "--max-cost" in record["error"]
    assert record["cost_usd"] > 1e-9
    assert record["resolved"] is False  # checked all the same: nothing was written
    stats = json.loads((result.run_dir / "statistics.json").read_text())
    assert stats["failures_by_reason"] == {"cost_limit": 1}


def test_max_cost_needs_a_price(llm: RoutedLLM, tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"prompt": "hello"}])
    with pytest.raises(ValueError, match=r'--max-cost needs the price of openai:unpriced: add \[prices'):
        run_batch(BatchOptions(tasks_file=tasks, run_name="p", output_dir=tmp_path / "data",
                               model="openai:unpriced", max_cost=1.0), progress_out=None)
    assert not (tmp_path / "data").exists()


def test_oracle_runs_a_task_lines_solution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TALARIA_HOME", str(tmp_path / "home"))
    solution = tmp_path / "fix"
    solution.mkdir()
    (solution / "solve.sh").write_text("printf 'fixed\\n' > state.txt\n")
    tasks = write_tasks(tmp_path / "tasks.jsonl", [
        {"id": "solvable", "prompt": "fix it", "solution": "fix",
         "check": 'test "$(cat state.txt)" = fixed'},
        {"id": "no-solution", "prompt": "fix it too", "check": "true"},
    ])
    result = run_batch(BatchOptions(tasks_file=tasks, run_name="o", output_dir=tmp_path / "data",
                                    agent="oracle"), progress_out=None)
    got = {r["task_id"]: r for r in lines(result.run_dir)}
    assert (got["solvable"]["status"], got["solvable"]["resolved"]) == ("completed", True)
    assert (got["no-solution"]["status"], got["no-solution"]["reason"]) == ("failed", "no_solution")
    assert got["solvable"]["agent"] == "oracle" and got["solvable"]["turns"] == 0
