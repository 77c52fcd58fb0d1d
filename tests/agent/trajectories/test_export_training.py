"""Training exports of a verified batch (issue 26 point 5): `--solved-only` / `--min-reward`,
the outcome (reward, resolved, cost) on every record, every ATIF document valid by the `atif`
package's models, a timed-out attempt marked partial, and a filter that keeps nothing refused
in one line with nothing written.

One real batch (worker processes, checks run in each workspace, the request-keyed fake LLM on
loopback, a price for its model), then the real `talaria` command on its output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from talaria.agent.trajectories.export.atif import validate
from tests import ROOT
from tests.batchllm import RoutedLLM, prompt_of, script_turn

STALL_S = 4.0
"""How long the model takes to answer the task that times out (its timeout: 1 s)."""
TASKS = [
    {"id": "ok", "prompt": "write out.txt hello", "check": 'test "$(cat out.txt)" = hello'},
    {"id": "half", "prompt": "write out.txt x", "check": "echo 0.5 > /logs/verifier/reward.txt"},
    {"id": "wrong", "prompt": "write out.txt bye", "check": 'test "$(cat out.txt)" = hello'},
    {"id": "unchecked", "prompt": "write out.txt x"},
    {"id": "stalled", "prompt": "stall", "timeout": 1, "check": "exit 1"},
]


def route(body: dict) -> dict:
    if prompt_of(body) == "stall":
        time.sleep(STALL_S)
    return script_turn(body)


def talaria(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "talaria.acp_server.cli.main", *args], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    root = tmp_path_factory.mktemp("training")
    home = root / "home"
    home.mkdir()
    (home / "config.toml").write_text('[prices."openai:fake"]\ninput = 3.0\noutput = 15.0\n')
    (root / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    with RoutedLLM(route) as llm:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-test",
               "OPENAI_BASE_URL": llm.openai_base_url, "TALARIA_HOME": str(home)}
        done = talaria("batch", str(root / "tasks.jsonl"), "--run-name", "r", "--output-dir",
                       str(root / "data"), "--workers", "3", "--model", "openai:fake", env=env)
    assert done.returncode == 1, done.stderr  # the stalled task failed (timeout)
    path = root / "data" / "r" / "trajectories.jsonl"
    rows = {r["task_id"]: r for r in map(json.loads, path.read_text().splitlines())}
    yield {"root": root, "file": path, "rows": rows, "env": env}


def export(run: dict, *args: str, source: Path | None = None) -> subprocess.CompletedProcess[str]:
    return talaria("trajectories", "export", str(source or run["file"]), *args, env=run["env"])


def test_the_run_has_every_kind_of_outcome(run: dict) -> None:
    got = {k: (r["reward"], r["resolved"], r["reason"]) for k, r in run["rows"].items()}
    assert got == {"ok": (1.0, True, "end_turn"), "half": (0.5, False, "end_turn"),
                   "wrong": (0.0, False, "end_turn"), "unchecked": (None, None, "end_turn"),
                   "stalled": (0.0, False, "timeout")}
    assert all(isinstance(r["cost_usd"], float) for r in run["rows"].values() if r["turns"])


@pytest.mark.parametrize("fmt", ["sharegpt", "openai", "atif"])
def test_every_record_carries_its_outcome(run: dict, fmt: str, tmp_path: Path) -> None:
    out = tmp_path / f"all.{fmt}"
    done = export(run, "--format", fmt, "-o", str(out))
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == len(TASKS)
    for source, record in zip(run["rows"].values(), records, strict=True):  # in file order
        if fmt == "atif":
            validate(record)  # every ATIF document, partial ones too
            assert record["schema_version"] == "ATIF-v1.8"
            assert record["extra"]["task_id"] == source["task_id"]
            reward, resolved = record["extra"]["reward"], record["extra"]["resolved"]
            cost = record["final_metrics"].get("total_cost_usd")
            assert record["extra"]["partial"] is (source["reason"] != "end_turn")
        else:
            reward, resolved, cost = record["reward"], record["resolved"], record["cost_usd"]
        assert (reward, resolved, cost) == (source["reward"], source["resolved"], source["cost_usd"])


def test_a_timed_out_attempt_is_a_partial_atif_document(run: dict, tmp_path: Path) -> None:
    out = tmp_path / "all.atif"
    assert export(run, "--format", "atif", "-o", str(out)).returncode == 0
    docs = {d["extra"]["task_id"]: d for d in map(json.loads, out.read_text().splitlines())}
    stalled = docs["stalled"]["extra"]
    assert (stalled["partial"], stalled["status"], stalled["reason"]) == (True, "failed", "timeout")
    assert docs["ok"]["extra"]["partial"] is False


@pytest.mark.parametrize(("args", "kept"), [
    (["--solved-only"], ["ok"]),
    (["--min-reward", "0.5"], ["ok", "half"]),
    (["--min-reward", "0"], ["ok", "half", "wrong", "stalled"]),  # no verdict: left out
    (["--solved-only", "--min-reward", "0.5"], ["ok"]),
])
def test_filters_keep_what_the_verifier_passed(run: dict, args: list[str], kept: list[str],
                                               tmp_path: Path) -> None:
    out = tmp_path / "kept.atif"
    done = export(run, "--format", "atif", "-o", str(out), *args)
    assert done.returncode == 0, done.stderr
    docs = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(d["extra"]["task_id"] for d in docs) == sorted(kept)
    assert f"({len(TASKS) - len(kept)} left out by the filter)" in done.stderr
    for doc in docs:
        validate(doc)


def test_a_filter_that_keeps_nothing_writes_nothing(run: dict, tmp_path: Path) -> None:
    unsolved = tmp_path / "unsolved.jsonl"
    unsolved.write_text("".join(json.dumps(run["rows"][k]) + "\n" for k in ("wrong", "stalled")))
    for fmt in ("sharegpt", "openai", "atif"):
        out = tmp_path / f"none.{fmt}"
        done = export(run, "--format", fmt, "-o", str(out), "--solved-only", source=unsolved)
        assert done.returncode == 2 and not out.exists() and not done.stdout
        assert done.stderr == ("talaria: no trajectory matches --solved-only: 2 read, 2 of them "
                               "have a verdict; nothing was written\n")
    session = tmp_path / "session.jsonl"  # a transcript: nothing ever checked it
    session.write_text(json.dumps({"role": "user", "content": "hi"}) + "\n"
                       + json.dumps({"role": "assistant", "content": "hello"}) + "\n")
    done = export(run, "--min-reward", "0.5", source=session)
    assert done.returncode == 2 and not done.stdout
    assert "none has a verdict (only a batch run with checks gives one)" in done.stderr
    assert done.stderr.count("\n") == 1


def test_a_reward_out_of_range_is_one_line(run: dict) -> None:
    done = export(run, "--min-reward", "2")
    assert done.returncode == 2 and not done.stdout
    assert done.stderr == "talaria: --min-reward 2: a reward is between 0 and 1\n"
