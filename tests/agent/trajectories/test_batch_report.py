"""The batch page of verified runs: real runs (control agents, no model), rendered as
`talaria trajectories view RUN_DIR` writes them: verdicts, the check's output, failing test
names, attempts with pass@k, cost, and a failed task's prompt and error."""

from __future__ import annotations

import json
import subprocess
from html import escape
from pathlib import Path

import pytest

from talaria.agent.trajectories.batch.runner import BatchOptions, run_batch
from talaria.agent.trajectories.report import load_batch, render_batch
from tests import ROOT


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TALARIA_HOME", str(tmp_path / "home"))


def test_a_page_shows_verdicts_attempts_and_errors(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in [
        {"id": "fine", "prompt": "leave it", "tags": ["smoke"], "check": "echo all good"},
        {"id": "unsolved", "prompt": "make it pass", "tags": ["smoke"],
         "check": "echo 'expected 3, got 2' && exit 1"},
        {"id": "no-env", "prompt": "fix the parser bug", "environment": "nowhere",
         "check": "true"},
    ]))
    result = run_batch(BatchOptions(tasks_file=tasks, run_name="page", output_dir=tmp_path,
                                    agent="nop", attempts=2, workers=2), progress_out=None)
    html = render_batch(*load_batch(result.run_dir))
    assert "<h2>Verification</h2>" in html and "pass@2" in html
    assert "Per tag" in html and "smoke" in html and "Attempts per task" in html
    assert "✓ resolved" in html and "✗ not resolved" in html
    assert "all good" in html and escape("expected 3, got 2") in html  # the check's output
    assert "unsolved #2" in html  # each attempt is a row
    # The failed task: its prompt in the table, its error on the page.
    table = html[html.index("<h2>Tasks</h2>"):]
    row = table[table.index("<td>no-env</td>"):]
    assert "fix the parser bug" in row[:400]
    assert "unknown environment &#x27;nowhere&#x27;" in html
    assert "Error (environment_error)" in html


def test_a_page_names_the_failing_tests(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    subprocess.run(["sh", str(ROOT / "examples" / "swebench" / "make_repos.sh"), str(repos)],
                   check=True, capture_output=True)
    result = run_batch(BatchOptions(tasks_file=ROOT / "examples" / "swebench" / "instances.jsonl",
                                    run_name="swe", output_dir=tmp_path, repos=repos, agent="nop"),
                       progress_out=None)
    html = render_batch(*load_batch(result.run_dir))
    assert "failing tests (1)" in html
    assert "tests.test_ops.TestAdd.test_add" in html
    assert "tests.test_ops.TestDivide.test_divide_by_zero" in html
