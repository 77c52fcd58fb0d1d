"""`talaria trajectories compare` end to end: real `talaria batch` runs (the oracle and nop
controls on the SWE-bench samples, two models of the fake LLM on task lines), then the real
command in a subprocess: its JSON, its page, and bad input as one line that writes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from talaria.agent.trajectories.batch.runner import BatchOptions, run_batch
from talaria.agent.trajectories.compare.build import compare_runs
from talaria.agent.trajectories.compare.outcomes import Attempt, RunOutcomes
from talaria.agent.trajectories.compare.page import render_compare
from tests import ROOT
from tests.batchllm import RoutedLLM, prompt_of, tool_results

SAMPLES = ROOT / "examples" / "swebench"
PRICES = {"strong": (3.0, 15.0), "weak": (0.5, 1.5)}
"""Dollars per million input / output tokens of openai:strong and openai:weak."""


def compare(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "talaria.acp_server.cli.main", "trajectories",
                           "compare", *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=120)


def batch(root: Path, tasks: Path, name: str, **options: object) -> Path:
    result = run_batch(BatchOptions(tasks_file=tasks, run_name=name, output_dir=root / "data",
                                    workers=2, **options), progress_out=None)  # type: ignore[arg-type]
    return result.run_dir


def write_tasks(path: Path, tasks: list[dict]) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def controls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """The oracle and nop over the two SWE-bench samples, plus runs for the bad-input cases."""
    root = tmp_path_factory.mktemp("controls")
    repos = root / "repos"
    subprocess.run(["sh", str(SAMPLES / "make_repos.sh"), str(repos)], capture_output=True,
                   check=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TALARIA_HOME", str(root / "home"))
        runs = {agent: batch(root, SAMPLES / "instances.jsonl", agent, agent=agent, repos=repos)
                for agent in ("oracle", "nop")}
        other = write_tasks(root / "other.jsonl", [{"id": "elsewhere", "prompt": "x", "check": "false"}])
        runs["other"] = batch(root, other, "other", agent="nop")
        unchecked = write_tasks(root / "unchecked.jsonl", [{"id": "example__calc-1", "prompt": "x"}])
        runs["unchecked"] = batch(root, unchecked, "unchecked", agent="nop")
    yield runs


def test_the_oracle_against_nop_is_the_whole_difference(controls: dict[str, Path], tmp_path: Path) -> None:
    done = compare(str(controls["oracle"]), str(controls["nop"]), "-o", str(tmp_path / "c.html"),
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(tmp_path / "c.html"), str(tmp_path / "c.json")]
    data = json.loads((tmp_path / "c.json").read_text())
    assert data["shared_tasks"] == 2 and [r["label"] for r in data["runs"]] == ["oracle", "nop"]
    (pair,) = data["comparisons"]
    assert (pair["a"], pair["b"]) == ("oracle", "nop")
    assert pair["outcomes"] == {"both": [], "a_only": ["example__calc-1", "example__calc-2"],
                                "b_only": [], "neither": []}
    assert pair["mcnemar"] == {"b": 2, "c": 0, "method": "exact", "statistic": None, "p_value": 0.5}
    for metric in ("pass_at_1", "solved", "reward"):
        assert pair["difference"][metric] | {"level": 0, "resamples": 0} == {
            "a": 1.0, "b": 0.0, "diff": -1.0, "ci": [-1.0, -1.0], "level": 0, "resamples": 0}
    assert data["per_run"]["oracle"]["resolved_attempts"] == 2
    assert data["per_run"]["nop"]["cost_usd"]["per_solve"] is None  # nothing solved
    assert data["per_run"]["nop"]["when_solved"] == {
        "tasks": 0, "attempts": 0, "cost_usd": None, "turns": None, "tokens": None,
        "duration_s": None}
    assert data["runs"][0]["agents"] == {"oracle": 2}
    assert "difference -1.000 [-1.000, -1.000]" in done.stderr
    page = (tmp_path / "c.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    assert "Compare: oracle vs nop" in page and "example__calc-2" in page and "<svg" in page
    # The default names: both files in the current directory.
    again = compare(str(controls["nop"]), str(controls["oracle"]), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    data = json.loads((tmp_path / "compare-nop-vs-oracle.json").read_text())
    assert data["comparisons"][0]["counts"]["b_only"] == 2
    assert data["comparisons"][0]["difference"]["pass_at_1"]["diff"] == 1.0
    # A run's file stands for its directory; the same run twice is told apart, and equal.
    same = compare(str(controls["oracle"] / "trajectories.jsonl"), str(controls["oracle"]),
                   "-o", "same.html", cwd=tmp_path)
    assert same.returncode == 0, same.stderr
    data = json.loads((tmp_path / "same.json").read_text())
    assert [r["label"] for r in data["runs"]] == ["oracle", "oracle (2)"]
    assert data["comparisons"][0]["mcnemar"]["method"] == "none"
    assert data["comparisons"][0]["difference"]["solved"]["ci"] == [0.0, 0.0]


def test_the_page_escapes_what_the_runs_name() -> None:
    hostile = "<script>alert(1)</script>"
    runs = []
    for label, solved in ((f"{hostile}a", True), ("b&c", False)):
        run = RunOutcomes(label, Path(label))
        run.tasks[hostile] = [Attempt(solved, float(solved), None, 1, 10, 1.0, ((hostile, 1, 1),))]
        run.tasks["plain"] = [Attempt(True, 1.0, 0.5, 2, 20, 2.0, ())]
        run.agents[hostile] += 2
        runs.append(run)
    page = render_compare(compare_runs(runs, resamples=50, seed=0, level=0.9))
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "b&amp;c" in page and "90% CI" in page


def test_bad_input_is_one_line_and_writes_nothing(controls: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    broken = tmp_path / "broken"
    broken.mkdir()
    lines = (controls["oracle"] / "trajectories.jsonl").read_text()
    (broken / "trajectories.jsonl").write_text(lines + "{not json\n[1]\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    oracle = str(controls["oracle"])
    cases = [
        ((oracle, str(tmp_path / "missing")), "no run at"),
        ((oracle, str(empty)), "holds no trajectories.jsonl"),
        ((oracle, str(controls["other"])), "share no checked task"),
        ((oracle, str(controls["unchecked"])), "no checked attempt"),
        ((oracle, str(broken)), "2 of 4 line(s) cannot be read as batch lines (line 3: not JSON"),
        ((oracle,), "at least two runs"),
        ((oracle, str(controls["nop"]), "-o", "page.json"), "name the page OUT.html"),
        ((oracle, str(controls["nop"]), "--resamples", "0"), "--resamples must be"),
    ]
    for args, message in cases:
        done = compare(*args, cwd=out)
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
        assert done.stdout == ""
    assert list(out.iterdir()) == []


def route(body: dict) -> dict:
    """Writes out.txt and reads it back. The strong model writes what the check wants; the
    weak one gets the "hard" tasks wrong."""
    weak = "weak" in str(body.get("model"))
    results = tool_results(body)
    if not results:
        text = "no" if weak and "hard" in prompt_of(body) else "ok"
        return {"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": text}}]}
    if len(results) == 1:
        return {"tool_calls": [{"name": "read_file", "arguments": {"path": "out.txt"}}]}
    return {"text": "done"}


@pytest.fixture
def models(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[RoutedLLM]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("".join(
        f'[prices."openai:{m}"]\ninput = {i}\noutput = {o}\n' for m, (i, o) in PRICES.items()))
    with RoutedLLM(route) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("TALARIA_HOME", str(home))
        yield server


def test_two_models_on_the_same_tasks_and_a_partial_overlap(models: RoutedLLM, tmp_path: Path) -> None:
    check = 'test "$(cat out.txt)" = ok'
    tasks = [{"id": i, "prompt": f"write out.txt ({'hard' if i[0] == 'h' else 'easy'})",
              "check": check} for i in ("e1", "e2", "h1", "h2")]
    every = write_tasks(tmp_path / "tasks.jsonl", tasks)
    weak = batch(tmp_path, every, "weak", model="openai:weak", attempts=2)
    strong = batch(tmp_path, every, "strong", model="openai:strong")
    some = write_tasks(tmp_path / "some.jsonl", [tasks[0], tasks[2], {**tasks[0], "id": "x9"}])
    subset = batch(tmp_path, some, "subset", model="openai:strong")

    done = compare(str(weak), str(strong), "-o", "ws.html", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads((tmp_path / "ws.json").read_text())
    (pair,) = data["comparisons"]
    assert pair["outcomes"] == {"both": ["e1", "e2"], "a_only": [], "b_only": ["h1", "h2"],
                                "neither": []}
    assert pair["difference"]["pass_at_1"]["diff"] == 0.5
    assert pair["mcnemar"]["p_value"] == 0.5  # two discordant tasks: 2 · (½)²
    ci = pair["difference"]["pass_at_1"]["ci"]
    assert 0 <= ci[0] < 0.5 < ci[1] <= 1.0
    records = {name: [json.loads(x) for x in (run / "trajectories.jsonl").read_text().splitlines()]
               for name, run in (("weak", weak), ("strong", strong))}
    w, s = data["per_run"]["weak"], data["per_run"]["strong"]
    assert (w["attempts"], w["resolved_attempts"], s["attempts"], s["resolved_attempts"]) == (8, 4, 4, 4)
    for name, figures in (("weak", w), ("strong", s)):
        spent = records[name]
        assert figures["cost_usd"]["total"] == pytest.approx(sum(r["cost_usd"] for r in spent), abs=1e-6)
        assert figures["cost_usd"]["per_solve"] == pytest.approx(figures["cost_usd"]["total"] / 4, abs=1e-6)
        turns = sum(r["turns"] for r in spent)
        assert figures["turns"] == {"total": turns, "per_solve": turns / 4}
        tokens = sum(r["tokens"]["input"] + r["tokens"]["output"] for r in spent)
        assert figures["tokens"]["per_solve"] == pytest.approx(tokens / 4)
        # Like for like: the mean solve of e1 and e2, which both models solved.
        solves = [r for r in spent if r["task_id"] in ("e1", "e2") and r["resolved"]]
        assert figures["when_solved"]["turns"] == sum(r["turns"] for r in solves) / len(solves)
        assert figures["tools"]["write_file"]["per_attempt"] == 1.0
        assert figures["tools"]["read_file"]["calls"] == len(spent)
    assert w["turns"]["per_solve"] == 2 * s["turns"]["per_solve"]  # twice the attempts, half solve
    assert data["runs"][0]["models"] == {"openai:weak": 8}

    # Three runs, one of them on part of the tasks (and one the others lack).
    done = compare(str(weak), str(strong), str(subset), "-o", "three.html", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "compared 2 shared task(s); left out (not checked in every run): weak 2, strong 2, subset 1" in done.stderr
    data = json.loads((tmp_path / "three.json").read_text())
    assert data["shared_tasks"] == 2 and sorted(data["per_task"]) == ["e1", "h1"]
    assert [r["left_out_tasks"] for r in data["runs"]] == [["e2", "h2"], ["e2", "h2"], ["x9"]]
    assert [(c["a"], c["b"]) for c in data["comparisons"]] == [("weak", "strong"), ("weak", "subset")]
    page = (tmp_path / "three.html").read_text()
    assert "Compare: weak vs strong vs subset" in page and "write_file · subset" in page
