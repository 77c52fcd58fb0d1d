"""The batch runner's files without running tasks: task ids, the run directory's crash
recovery, statistics, the progress line, and the CLI's refusals."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from talaria.acp_server.cli.batch import main as cli_main
from talaria.agent.trajectories.batch.checkpoint import RunDir, RunExistsError
from talaria.agent.trajectories.batch.progress import Progress
from talaria.agent.trajectories.batch.runner import task_dir_name
from talaria.agent.trajectories.batch.stats import compute
from talaria.agent.trajectories.batch.tasks import TaskFileError, load_tasks


def test_task_ids_are_stable_and_independent_of_position(tmp_path: Path) -> None:
    (tmp_path / "tpl").mkdir()
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"prompt": "a"}\n\n{"prompt": "b", "workspace": "tpl"}\n{"prompt": "a"}\n'
                    '{"id": 7, "prompt": "c", "toolsets": "core"}\n')
    first = load_tasks(path)
    assert [t.prompt for t in first] == ["a", "b", "a", "c"]
    assert first[2].id == f"{first[0].id}-2" and first[3].id == "7"
    assert first[1].workspace == str((tmp_path / "tpl").resolve())
    assert first[3].toolsets == ("core",)
    path.write_text('{"prompt": "b", "workspace": "tpl"}\n{"prompt": "a"}\n')
    assert [t.id for t in load_tasks(path)] == [first[1].id, first[0].id]


@pytest.mark.parametrize("line, message", [
    ("nope", "not JSON"), ('{"id": "x"}', "prompt"), ('{"prompt": "p", "workspace": "missing"}',
                                                      "not a directory"),
    ('{"prompt": "p", "toolsets": [1]}', "toolsets"),
])
def test_bad_task_lines_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"prompt": "fine"}\n' + line + "\n")
    with pytest.raises(TaskFileError, match=f"tasks.jsonl:2: .*{message}"):
        load_tasks(path)


def test_duplicate_explicit_ids_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"id": "x", "prompt": "a"}\n{"id": "x", "prompt": "b"}\n')
    with pytest.raises(TaskFileError, match="duplicate id"):
        load_tasks(path)


def test_torn_last_line_is_cut_and_the_checkpoint_rebuilt(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run = RunDir.open(run_dir, meta={"run_name": "run"}, resume=False)
    run.append({"task_id": "a", "status": "completed", "reason": "end_turn"})
    run.append({"task_id": "b", "status": "failed", "reason": "timeout"})
    run.close()
    with (run_dir / "trajectories.jsonl").open("a") as f:
        f.write('{"task_id": "c", "status": "comp')  # kill -9 in the middle of a write
    (run_dir / "checkpoint.json").write_text('{"completed": ["a"]}')  # one task behind
    with pytest.raises(RunExistsError):
        RunDir.open(run_dir, meta={}, resume=False)
    run = RunDir.open(run_dir, meta={}, resume=True)
    assert run.finished == {("a", 1): "completed", ("b", 1): "failed"}
    assert (run_dir / "trajectories.jsonl").read_text().endswith('"timeout"}\n')
    checkpoint = json.loads((run_dir / "checkpoint.json").read_text())
    assert checkpoint["completed"] == ["a"] and checkpoint["failed"] == {"b": "timeout"}
    assert run.take_failed({("b", 1)}) == 1
    assert run.finished == {("a", 1): "completed"}
    assert json.loads((run_dir / "attempts.jsonl").read_text())["task_id"] == "b"
    run.append({"task_id": "b", "status": "completed", "reason": "end_turn"})
    run.close()
    ids = [json.loads(x)["task_id"] for x in (run_dir / "trajectories.jsonl").open()]
    assert ids == ["a", "b"]


def test_statistics_from_records() -> None:
    records = [
        {"status": "completed", "model": "m", "turns": 3, "duration_s": 2.0, "model_s": 1.5,
         "tokens": {"input": 100, "output": 10},
         "tool_stats": {"terminal": {"calls": 2, "failed": 1}}},
        {"status": "failed", "reason": "timeout", "model": "m", "turns": 1, "duration_s": 4.0,
         "tokens": {"input": 50, "output": 0}, "tool_stats": {}},
    ]
    stats = compute(records, {"workers": 2})
    assert stats["tasks"] == {"total": 2, "completed": 1, "failed": 1, "success_rate": 0.5}
    assert stats["failures_by_reason"] == {"timeout": 1}
    assert stats["tools"]["terminal"] == {"calls": 2, "failed": 1, "tasks_using": 1,
                                          "success_rate": 0.5}
    assert stats["turns"]["total"] == 4 and stats["duration_s"]["max"] == 4.0
    assert stats["tokens"]["input"] == 150 and stats["run"] == {"workers": 2}


def test_progress_line_reports_done_failed_rate_eta() -> None:
    now = [0.0]
    out = io.StringIO()
    progress = Progress(10, done=2, failed=1, out=out, clock=lambda: now[0])
    now[0] = 30.0
    progress.task_done(failed=False)
    progress.task_done(failed=True)
    assert progress.line() == ("[#########...............] 4/10 done, 2 failed, "
                               "4.0 tasks/min, ETA 1m30s")
    progress.draw(final=True)
    assert out.getvalue().splitlines()[-1].startswith("[#########")


def test_task_dir_names_are_safe() -> None:
    name = task_dir_name("../../etc/passwd")
    assert "/" not in name and not name.startswith(".")
    assert task_dir_name("a") != task_dir_name("a ")


def test_cli_refuses_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = tmp_path / "t.jsonl"
    tasks.write_text('{"prompt": "x"}\n')
    assert cli_main(["batch", str(tasks), "--run-name", "../x"]) == 2
    assert "--run-name" in capsys.readouterr().err
    assert cli_main(["batch", str(tasks), "--run-name", "r", "--toolsets", "nope"]) == 2
    assert "unknown toolset 'nope'" in capsys.readouterr().err
    assert cli_main(["batch", str(tmp_path / "none.jsonl"), "--run-name", "r"]) == 2
    with pytest.raises(SystemExit):
        cli_main(["batch", str(tasks), "--run-name", "r", "--resume", "--retry-failed"])
