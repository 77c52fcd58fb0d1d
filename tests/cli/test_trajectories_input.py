"""Every `talaria trajectories` command reads its input one way (issue 28): a file that is not
trajectories, or a batch file with a bad or cut line, is refused naming the line (exit 2, no
traceback, nothing written), by `export`, `view` and `compress` alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.acp.test_client import agent_env
from tests.cli.test_cli_run import talaria

GOOD = json.dumps({"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "hi"},
                                     {"from": "gpt", "value": "hello"}], "task_id": "a"})

BAD = {
    "not-json": ("{oops\n", "line 1: not JSON"),
    "arrays": ("[1, 2]\n[3]\n", "trajectories.jsonl"),
    "cut-line": (GOOD + "\n" + GOOD[: len(GOOD) // 2] + "\n" + GOOD + "\n", "line 2: not JSON"),
    "no-turns": (GOOD + "\n" + '{"task_id": "b"}\n' + GOOD + "\n", "line 2: "),
}


def commands(source: Path, out: Path) -> dict[str, list[str]]:
    return {"export": ["trajectories", "export", str(source), "-o", str(out)],
            "view": ["trajectories", "view", str(source), "-o", str(out)],
            "compress": ["trajectories", "compress", str(source), "-o", str(out),
                         "--summary-model", "replay:none", "--workers", "1"]}


@pytest.mark.parametrize("command", ["export", "view", "compress"])
@pytest.mark.parametrize("kind", list(BAD))
def test_input_that_is_not_trajectories_is_refused_by_every_command(
        tmp_path: Path, command: str, kind: str) -> None:
    text, said = BAD[kind]
    source = tmp_path / "trajectories.jsonl"
    source.write_text(text)
    out = tmp_path / "out"
    done = talaria(commands(source, out)[command], agent_env(tmp_path / "home"), tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert said in done.stderr, done.stderr
    assert not out.exists() and not list(tmp_path.glob(".out*"))


def test_a_run_directory_with_a_cut_line_is_refused_by_view(tmp_path: Path) -> None:
    run = tmp_path / "data" / "r"
    run.mkdir(parents=True)
    (run / "trajectories.jsonl").write_text(GOOD + "\n" + GOOD + "\n" + GOOD[:40] + "\n")
    done = talaria(["trajectories", "view", str(run)], agent_env(tmp_path / "home"), tmp_path)
    assert done.returncode == 2 and "line 3: not JSON" in done.stderr, done.stderr
    assert "no page was written" in done.stderr and not (run / "report.html").exists()
