"""`talaria batch` end to end: real worker processes, a real fake LLM on loopback, real files.

Covers concurrency, workspace isolation, failures with their partial trajectory, a worker that
dies mid-task, --retry-failed, statistics, and `kill -9` of a real run followed by --resume.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from talaria.agent.trajectories.batch.runner import BatchOptions, run_batch
from talaria.agent.trajectories.export.sharegpt import parse_sharegpt
from tests import ROOT
from tests.batchllm import RoutedLLM
from tests.helpers import group_alive


def write_tasks(path: Path, tasks: list[dict]) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks), encoding="utf-8")
    return path


def lines(run_dir: Path) -> list[dict]:
    text = (run_dir / "trajectories.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    with RoutedLLM(delay=0.3) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("TALARIA_HOME", str(tmp_path / "home"))
        yield server


def test_concurrent_isolated_tasks_and_statistics(llm: RoutedLLM, tmp_path: Path) -> None:
    template = tmp_path / "template"
    template.mkdir()
    (template / "README").write_text("template file\n")
    tasks = write_tasks(tmp_path / "tasks.jsonl", [
        {"id": "a", "prompt": "write shared.txt from-task-a", "workspace": "template"},
        {"id": "b", "prompt": "write shared.txt from-task-b", "workspace": "template"},
        {"id": "c", "prompt": "write shared.txt from-task-c"},
        {"id": "f", "prompt": "fail"},
    ])
    result = run_batch(BatchOptions(tasks_file=tasks, run_name="iso", output_dir=tmp_path / "data",
                                    workers=3, model="openai:fake"), progress_out=None)

    assert llm.peak >= 2  # tasks really ran at once
    records = {r["task_id"]: r for r in lines(result.run_dir)}
    assert sorted(records) == ["a", "b", "c", "f"]
    for task_id in "abc":  # each read back its own write: no shared workspace
        record = records[task_id]
        assert record["status"] == "completed", record
        assert parse_sharegpt(record)[-1]["content"] == f"read back: 1|from-task-{task_id}"
        used = {k: v for k, v in record["tool_stats"].items() if v["count"]}
        assert used == {"write_file": {"count": 1, "success": 1, "failure": 0},
                        "read_file": {"count": 1, "success": 1, "failure": 0}}
        assert "terminal" in record["tool_stats"], "every known tool: a stable dataset schema"
        assert record["conversations"][0]["from"] == "system" and "<tools>" in record["conversations"][0]["value"]
        assert record["turns"] == 3
    failed = records["f"]
    assert (failed["status"], failed["reason"]) == ("failed", "provider_error")
    assert "scripted failure" in failed["error"]
    assert [m["role"] for m in parse_sharegpt(failed)] == ["system", "user"]  # partial, kept

    stats = json.loads((result.run_dir / "statistics.json").read_text())
    assert stats["tasks"] == {"total": 4, "completed": 3, "failed": 1, "success_rate": 0.75}
    assert stats["failures_by_reason"] == {"provider_error": 1}
    assert stats["tools"]["write_file"] == {"calls": 3, "failed": 0, "tasks_using": 3,
                                            "success_rate": 1.0}
    assert stats["turns"]["total"] == 9
    assert stats["run"]["tasks_run"] == 4 and stats["run"]["executor"] == "local"
    checkpoint = json.loads((result.run_dir / "checkpoint.json").read_text())
    assert sorted(checkpoint["completed"]) == ["a", "b", "c"]
    assert checkpoint["failed"] == {"f": "provider_error"}
    assert not (result.run_dir / "tasks").exists()  # workspaces go once recorded
    assert not (result.run_dir / "homes").exists()
    assert (result.completed, result.failed) == (3, 1)

    # --retry-failed re-runs only "f"; the file keeps one line per task.
    llm.route = lambda body: {"text": "done"}
    llm.prompts.clear()
    again = run_batch(BatchOptions(tasks_file=tasks, run_name="iso", output_dir=tmp_path / "data",
                                   workers=2, retry_failed=True), progress_out=None)
    assert llm.prompts == ["fail"]
    assert again.ran == 1 and (again.completed, again.failed) == (4, 0)
    final = lines(again.run_dir)
    assert sorted(r["task_id"] for r in final) == ["a", "b", "c", "f"]
    assert all(r["status"] == "completed" for r in final)
    attempts = (again.run_dir / "attempts.jsonl").read_text().splitlines()
    assert [json.loads(a)["reason"] for a in attempts] == ["provider_error"]
    # The model came from the checkpoint: --retry-failed did not repeat --model.
    assert final[-1]["model"] == "openai:fake"


def test_worker_crash_and_timeout_are_recorded(llm: RoutedLLM, tmp_path: Path) -> None:
    llm.delay = 0.0

    def route(body: dict) -> dict:
        from tests.batchllm import prompt_of, script_turn

        if prompt_of(body) == "slow":
            time.sleep(3)
        return script_turn(body)

    llm.route = route
    tasks = write_tasks(tmp_path / "tasks.jsonl", [
        {"id": "crash", "prompt": "crash"}, {"id": "slow", "prompt": "slow"},
        {"id": "ok", "prompt": "hello"},
    ])
    result = run_batch(BatchOptions(tasks_file=tasks, run_name="c", output_dir=tmp_path / "data",
                                    workers=2, model="openai:fake", task_timeout=1),
                       progress_out=None)
    records = {r["task_id"]: r for r in lines(result.run_dir)}
    crash = records["crash"]
    assert (crash["status"], crash["reason"]) == ("failed", "worker_crashed")
    assert "SIGKILL" in crash["error"]
    # What the dead worker had committed to its store comes back as the partial trajectory.
    assert [m["role"] for m in parse_sharegpt(crash)] == ["system", "user", "assistant"]
    assert parse_sharegpt(crash)[-1]["tool_calls"][0]["name"] == "terminal"
    assert records["slow"]["reason"] == "timeout"
    assert records["ok"]["status"] == "completed"  # the pool replaced the dead worker
    assert json.loads((result.run_dir / "statistics.json").read_text())["failures_by_reason"] == {
        "worker_crashed": 1, "timeout": 1}


def test_kill_9_then_resume_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    ids = [f"t{i:02d}" for i in range(24)]
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"id": i, "prompt": f"task {i}"} for i in ids])
    with RoutedLLM(delay=0.15) as llm:
        env = {**os.environ, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": llm.openai_base_url,
               "TALARIA_HOME": str(tmp_path / "home")}
        command = [sys.executable, "-m", "talaria.acp_server.cli.batch", "batch", str(tasks),
                   "--run-name", "k", "--output-dir", str(tmp_path / "data"), "--workers", "3",
                   "--model", "openai:fake"]
        run_dir = tmp_path / "data" / "k"
        proc = subprocess.Popen(command, env=env, cwd=ROOT, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            path = run_dir / "trajectories.jsonl"
            if path.exists() and path.read_bytes().count(b"\n") >= 5:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)  # the runner only: its workers must notice alone
        proc.wait()
        before = lines(run_dir)
        assert 5 <= len(before) < len(ids), "kill -9 landed too late to test anything"
        deadline = time.monotonic() + 10
        while group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not group_alive(proc.pid), "worker processes outlived their runner"

        served = len(llm.prompts)
        resumed = subprocess.run([*command[:-2], "--resume"], env=env, cwd=ROOT,
                                 capture_output=True, text=True, timeout=60)
        assert resumed.returncode == 0, resumed.stderr
    after = lines(run_dir)
    seen = [r["task_id"] for r in after]
    assert sorted(seen) == ids  # no losses, no duplicates
    assert after[: len(before)] == before  # finished lines untouched
    rerun = llm.prompts[served:]
    assert not {f"task {r['task_id']}" for r in before} & set(rerun)  # finished ones skipped
    checkpoint = json.loads((run_dir / "checkpoint.json").read_text())
    assert sorted(checkpoint["completed"]) == ids
    assert "done, 0 failed" in resumed.stderr
    # The killed invocation's figures survive in the checkpoint (at most one task behind).
    stats = json.loads((run_dir / "statistics.json").read_text())
    assert stats["run"]["invocations"] == 2 and stats["tasks"]["total"] == len(ids)
    killed, rest = stats["runs"]
    assert rest["tasks_run"] == len(ids) - len(before) and rest["resume"] is True
    assert killed["tasks_run"] in (len(before) - 1, len(before))


def test_existing_run_needs_resume(llm: RoutedLLM, tmp_path: Path) -> None:
    llm.delay = 0.0
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"prompt": "hello"}])
    options = BatchOptions(tasks_file=tasks, run_name="r", output_dir=tmp_path / "data",
                           workers=1, model="openai:fake")
    run_batch(options, progress_out=None)
    from talaria.agent.trajectories.batch.checkpoint import RunExistsError

    with pytest.raises(RunExistsError, match="--resume"):
        run_batch(options, progress_out=None)
    resumed = run_batch(BatchOptions(**{**_fields(options), "resume": True}), progress_out=None)
    assert resumed.ran == 0 and resumed.completed == 1


def _fields(options: BatchOptions) -> dict:
    return {name: getattr(options, name) for name in options.__dataclass_fields__}


@pytest.mark.parametrize("keep, off", [(True, False), (True, True), (False, False)],
                         ids=["kept", "no-checkpoints", "not-kept"])
def test_batch_tasks_record_checkpoints_where_they_are_kept(llm: RoutedLLM, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            keep: bool, off: bool) -> None:
    # Checkpoints are taken with --keep-workspaces (the worker homes that hold them stay);
    # otherwise they would be deleted with the homes at the end: not taken at all.
    from talaria.agent.trajectories.batch import executors

    real = executors.LocalExecutor.__init__

    def keep_homes(self, *args, **kwargs):  # look at the worker homes after the run
        real(self, *args, **{**kwargs, "keep_homes": True})
    monkeypatch.setattr(executors.LocalExecutor, "__init__", keep_homes)
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"id": "a", "prompt": "write shared.txt x"}])
    result = run_batch(BatchOptions(tasks_file=tasks, run_name="cp", output_dir=tmp_path / "data",
                                    workers=1, model="openai:fake", no_checkpoints=off,
                                    keep_workspaces=keep),
                       progress_out=None)
    seen = [any((home / "checkpoints").glob("*/journal.json"))
            for home in (result.run_dir / "homes").iterdir()]
    assert lines(result.run_dir)[0]["status"] == "completed"
    assert seen == [keep and not off]


def _spawned(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many worker processes each LocalExecutor of the test started, filled as it ends."""
    from talaria.agent.trajectories.batch import executors

    counts: list[int] = []
    real = executors.LocalExecutor.__aexit__

    async def counted(self, *exc):
        counts.append(self._spawned)
        await real(self, *exc)
    monkeypatch.setattr(executors.LocalExecutor, "__aexit__", counted)
    return counts


def test_workers_past_the_cores_start_when_jobs_wait_on_the_model(
        llm: RoutedLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A slow model (0.3 s a call, 3 calls a task): jobs wait while the workers sleep, so the
    pool grows to all its workers."""
    spawned = _spawned(monkeypatch)
    workers = len(os.sched_getaffinity(0)) + 2
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"id": f"t{i}", "prompt": f"write t{i}.txt x"}
                                                   for i in range(workers * 2)])
    result = run_batch(BatchOptions(tasks_file=tasks, run_name="grow", output_dir=tmp_path / "data",
                                    workers=workers, model="openai:fake"), progress_out=None)
    assert result.completed == workers * 2
    assert spawned == [workers] and llm.peak == workers


def test_quick_jobs_are_run_by_one_worker_per_core(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs that never wait long for a free worker: no more processes than cores take turns on
    them (issue 29: 8 workers on 2 cores were slower than 2). The pool's grow delay is made
    long, so how quick the jobs are on a loaded machine does not matter."""
    from talaria.agent.trajectories.batch import executors

    monkeypatch.setattr(executors, "GROW_AFTER_S", 60.0)
    spawned = _spawned(monkeypatch)
    result = _replay_run(tmp_path, monkeypatch, [{"text": "done"}], tasks=20)
    assert result.completed == 20
    assert spawned == [min(8, len(os.sched_getaffinity(0)))]


def test_jobs_that_keep_the_cores_busy_get_no_more_workers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each job runs a command that keeps a core busy for 0.6 s in a child of its worker:
    jobs wait for a worker, but the cores are busy, so the pool stays at one worker per core
    (grow-on-wait alone started all 8)."""
    spawned = _spawned(monkeypatch)
    busy = "import time; t = time.time(); [0 for _ in iter(lambda: time.time() - t < 0.6, False)]"
    turns = [{"tool_calls": [{"name": "terminal", "arguments": {"command": f'python3 -c "{busy}"'}}]},
             {"text": "done"}]
    cores = len(os.sched_getaffinity(0))
    result = _replay_run(tmp_path, monkeypatch, turns, tasks=3 * cores)
    assert result.completed == 3 * cores
    # One per core; one more at most when other processes crowd the cores (the whole suite
    # beside it: the tree then gets less CPU and may look idle for a moment). Grow-on-wait
    # alone started all 8.
    assert len(spawned) == 1 and min(8, cores) <= spawned[0] <= min(8, cores + 1)


def _replay_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, turns: list[dict], *, tasks: int):
    monkeypatch.setenv("TALARIA_HOME", str(tmp_path / "home"))
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"turns": turns}))
    lines_ = write_tasks(tmp_path / "tasks.jsonl", [{"id": f"t{i}", "prompt": "go"} for i in range(tasks)])
    return run_batch(BatchOptions(tasks_file=lines_, run_name="pool", output_dir=tmp_path / "data",
                                  workers=8, model=f"replay:{scenario}"), progress_out=None)
