"""What a real batch run leaves behind, used the way a user does (issue 10 items 1-3).

One real `talaria batch` run (worker processes, the request-keyed fake LLM on loopback): its
exit status, its lines' `prompt_index`, every line exported in every format (or a failure
naming the lines that cannot be), the HTML report's task ids; then statistics across resumes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from talaria.agent.trajectories.batch.runner import BatchOptions, run_batch
from talaria.agent.trajectories.export.atif import validate
from talaria.agent.trajectories.export.sharegpt import parse_sharegpt
from tests import ROOT
from tests.batchllm import RoutedLLM

PROMPTS = ["write a.txt alpha", "hello", "write b.txt beta", "fail", "hello again",
           "write c.txt gamma", "one more", "write d.txt delta", "last but one", "the end"]
FAILED = "fail"


def talaria(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The real `talaria` entry point (console script `talaria.acp_server.cli.main:main`)."""
    return subprocess.run([sys.executable, "-m", "talaria.acp_server.cli.main", *args], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    root = tmp_path_factory.mktemp("batch-outputs")
    lines = [json.dumps({"id": f"task-{i}", "prompt": p}) for i, p in enumerate(PROMPTS)]
    lines.insert(4, "")  # a blank line does not count as a task (Hermes counts the same way)
    (root / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    with RoutedLLM() as llm:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-test",
               "OPENAI_BASE_URL": llm.openai_base_url, "TALARIA_HOME": str(root / "home")}
        done = talaria("batch", str(root / "tasks.jsonl"), "--run-name", "r", "--output-dir",
                       str(root / "data"), "--workers", "3", "--model", "openai:fake", env=env)
    run_dir = root / "data" / "r"
    rows = [json.loads(x) for x in (run_dir / "trajectories.jsonl").read_text().splitlines()]
    yield {"root": root, "dir": run_dir, "done": done, "rows": rows, "env": env}


def test_a_failed_task_makes_a_non_zero_exit(run: dict) -> None:
    done = run["done"]
    assert done.returncode == 1, done.stderr
    assert "9 completed, 1 failed of 10" in done.stderr
    assert "1 provider_error" in done.stderr and "--retry-failed" in done.stderr
    # The cause, not only its kind (issue 28): the first error of each kind is said.
    assert "  provider_error, first in task task-3: " in done.stderr
    assert "scripted failure" in done.stderr.split("first in task task-3: ")[1].splitlines()[0]
    missing = talaria("batch", str(run["root"] / "nope.jsonl"), "--run-name", "x", env=run["env"])
    assert missing.returncode == 2 and "nope.jsonl" in missing.stderr


def test_prompt_index_is_the_tasks_position_in_the_file(run: dict) -> None:
    assert len(run["rows"]) == len(PROMPTS)
    for row in run["rows"]:
        index = int(row["task_id"].removeprefix("task-"))
        assert row["prompt_index"] == index, row["task_id"]
        assert parse_sharegpt(row)[1]["content"] == PROMPTS[index]


@pytest.mark.parametrize("fmt", ["sharegpt", "openai", "atif"])
def test_export_writes_every_line_in_order(run: dict, fmt: str, tmp_path: Path) -> None:
    out = tmp_path / f"out.{fmt}"
    done = talaria("trajectories", "export", str(run["dir"] / "trajectories.jsonl"),
                   "--format", fmt, "-o", str(out), env=run["env"])
    assert done.returncode == 0, done.stderr
    assert f"exported {len(PROMPTS)} trajectory(ies)" in done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == len(run["rows"])
    for source, record in zip(run["rows"], records, strict=True):
        prompt = PROMPTS[source["prompt_index"]]
        usage = source["metadata"]["usage"]
        if fmt != "atif":  # the outcome, as the batch line recorded it (no check; no price
            keys = ("reward", "resolved", "cost_usd")  # but 0.0 for a task with no call)
            assert [record[k] for k in keys] == [source[k] for k in keys]
            assert source["reward"] is source["resolved"] is None
        if fmt == "sharegpt":
            assert record["prompt_index"] == source["prompt_index"]
            assert record["conversations"] == source["conversations"]
            assert record["metadata"]["usage"] == usage
            assert record["completed"] == source["completed"]
        elif fmt == "openai":
            users = [m["content"] for m in record["messages"] if m["role"] == "user"]
            assert users == [prompt]
            calls = [c for m in record["messages"] for c in m.get("tool_calls") or ()]
            assert len(calls) == sum(s["count"] for s in source["tool_stats"].values())
        else:
            validate(record)
            assert record["schema_version"] == "ATIF-v1.8"
            assert record["final_metrics"].get("total_cost_usd") == source["cost_usd"]
            assert record["extra"]["task_id"] == source["task_id"]
            assert record["extra"]["prompt_index"] == source["prompt_index"]
            assert record["steps"][1] == {**record["steps"][1], "source": "user", "message": prompt}
            assert record["final_metrics"]["total_prompt_tokens"] == usage["input_tokens"]
            failed = source["status"] == "failed"
            assert (record["extra"]["status"], record["extra"]["completion_status"]) == (
                ("failed", "partial") if failed else ("completed", "completed"))
            assert record["extra"]["partial"] is failed


def test_export_names_the_lines_it_cannot_convert(run: dict, tmp_path: Path) -> None:
    lines = (run["dir"] / "trajectories.jsonl").read_text().splitlines()
    lines[2] = lines[2][: len(lines[2]) // 2]  # cut mid-line: not JSON
    broken = json.loads(lines[6])
    broken["conversations"].append({"from": "robot", "value": "?"})
    lines[6] = json.dumps(broken)
    source = tmp_path / "broken.jsonl"
    source.write_text("\n".join(lines) + "\n")
    for fmt in ("sharegpt", "openai", "atif"):
        out = tmp_path / f"out.{fmt}"
        done = talaria("trajectories", "export", str(source), "--format", fmt, "-o", str(out),
                       env=run["env"])
        assert done.returncode == 2, done.stderr
        assert "2 of 10 line(s)" in done.stderr
        assert "line 3: not JSON" in done.stderr and "line 7:" in done.stderr
        assert "robot" in done.stderr and "nothing was exported" in done.stderr
        assert not out.exists() and not done.stdout


@pytest.mark.parametrize("given", ["dir", "file"])
def test_the_report_shows_task_ids_and_indexes(run: dict, tmp_path: Path, given: str) -> None:
    page = tmp_path / "report.html"
    source = run["dir"] if given == "dir" else run["dir"] / "trajectories.jsonl"
    done = talaria("trajectories", "view", str(source), "-o", str(page), env=run["env"])
    assert done.returncode == 0, done.stderr
    html = page.read_text()
    for i in range(len(PROMPTS)):
        assert f"<tr><td>task-{i}</td><td class=\"n\">{i}</td>" in html
    assert "<td>#0</td>" not in html
    # Issue 28: the run's name (not "trajectories"), tasks in the file's order (lines are in
    # completion order), a failed task's prompt and error.
    assert "<h1>Batch: r</h1>" in html
    rows = [html.index(f"<tr><td>task-{i}</td>") for i in range(len(PROMPTS))]
    assert rows == sorted(rows)
    chart = html[html.index("Turns per task"):html.index("Tokens per task")]
    labels = [chart.index(f">task-{i}<") for i in range(len(PROMPTS))]
    assert labels == sorted(labels)
    failed_row = html[html.index("<tr><td>task-3</td>"):].split("</tr>")[0]
    assert "<td>fail</td>" in failed_row and "failed (provider_error)" in failed_row
    assert "scripted failure" in failed_row


def test_resuming_with_another_tasks_file_is_refused(run: dict, tmp_path: Path) -> None:
    """Issue 28: `--resume` of run r with other tasks would mix two runs' counts."""
    other = tmp_path / "other.jsonl"
    other.write_text('{"id": "x", "prompt": "hello"}\n')
    before = (run["dir"] / "checkpoint.json").read_text()
    done = talaria("batch", str(other), "--run-name", "r", "--output-dir", str(run["root"] / "data"),
                   "--resume", env=run["env"])
    assert done.returncode == 2, done.stderr
    assert f"was started from {run['root'] / 'tasks.jsonl'}, not {other}" in done.stderr
    assert (run["dir"] / "checkpoint.json").read_text() == before


def test_an_empty_tasks_file_is_refused(run: dict, tmp_path: Path) -> None:
    for text in ("", "\n  \n"):
        empty = tmp_path / "empty.jsonl"
        empty.write_text(text)
        done = talaria("batch", str(empty), "--run-name", "e", "--output-dir", str(tmp_path / "data"),
                       env=run["env"])
        assert done.returncode == 2, done.stderr
        assert "empty.jsonl: no tasks (one JSON object per line" in done.stderr
        assert not (tmp_path / "data").exists()


def test_statistics_cover_every_invocation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with RoutedLLM() as llm:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", llm.openai_base_url)
        monkeypatch.setenv("TALARIA_HOME", str(tmp_path / "home"))
        tasks = tmp_path / "tasks.jsonl"
        tasks.write_text("".join(json.dumps({"id": f"t{i}", "prompt": "hello"}) + "\n"
                                 for i in range(3)))
        options = BatchOptions(tasks_file=tasks, run_name="s", output_dir=tmp_path / "data",
                               workers=2, model="openai:fake")
        run_batch(options, progress_out=None)
        with tasks.open("a") as more:  # two more tasks, then --resume runs only those
            more.writelines(json.dumps({"id": f"t{i}", "prompt": "hello"}) + "\n" for i in (3, 4))
        resumed = BatchOptions(**{**_fields(options), "resume": True, "workers": 1})
        assert run_batch(resumed, progress_out=None).ran == 2
        stats_file = tmp_path / "data" / "s" / "statistics.json"
        stats = json.loads(stats_file.read_text())
        assert stats["tasks"]["total"] == 5
        assert [r["tasks_run"] for r in stats["runs"]] == [3, 2]
        assert [r["workers"] for r in stats["runs"]] == [2, 1]
        assert stats["run"]["tasks_run"] == 5 and stats["run"]["invocations"] == 2
        assert stats["run"]["wall_s"] == round(sum(r["wall_s"] for r in stats["runs"]), 3)

        assert run_batch(resumed, progress_out=None).ran == 0  # a finished run, resumed again
        again = json.loads(stats_file.read_text())
        assert again["run"] == stats["run"] and again["runs"] == stats["runs"]
        assert again["tasks"] == stats["tasks"]


def test_an_invocation_interrupted_before_a_task_finished_still_counts(tmp_path: Path) -> None:
    """Issue 28: Ctrl-C while the first task waits on the model, then --resume: two invocations."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "t0", "prompt": "hello"}\n')
    args = [sys.executable, "-m", "talaria.acp_server.cli.main", "batch", str(tasks), "--run-name",
            "i", "--output-dir", str(tmp_path / "data"), "--workers", "1", "--model", "openai:fake"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-test",
           "TALARIA_HOME": str(tmp_path / "home")}
    with RoutedLLM(delay=60) as slow:
        # As a terminal's shell starts it: a suite run from a background job (`cmd &`) has
        # SIGINT ignored, which the child would inherit and keep ignoring.
        child = subprocess.Popen(args, env={**env, "OPENAI_BASE_URL": slow.openai_base_url},
                                 stderr=subprocess.PIPE, text=True, start_new_session=True,
                                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 120
        while not slow.prompts and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.1)
        assert slow.prompts, "the task never reached the model"
        os.killpg(child.pid, signal.SIGINT)  # Ctrl-C at a terminal: the whole group
        _, err = child.communicate(timeout=120)
    assert child.returncode == 130, err
    with RoutedLLM() as fast:
        done = subprocess.run([*args, "--resume"], env={**env, "OPENAI_BASE_URL": fast.openai_base_url},
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    stats = json.loads((tmp_path / "data" / "i" / "statistics.json").read_text())
    assert stats["run"]["invocations"] == 2 and [r["tasks_run"] for r in stats["runs"]] == [0, 1]


def test_warm_models_loads_each_sdk_and_its_lazy_modules() -> None:
    """What a worker runs as set-up before a task's turn, so model_s never holds the SDK
    import (benchmarks/batch.py `batch_model_time` measures the effect)."""
    code = ("import sys\n"
            "from talaria.agent.trajectories.batch.sdk import warm_models\n"
            "warm_models(['replay:x.jsonl'])\n"
            "print('openai' in sys.modules, 'anthropic' in sys.modules)\n"
            "warm_models(['openai:fake', 'anthropic:claude-x'])\n"
            "print('openai.resources.chat' in sys.modules, 'anthropic.resources.messages' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False", "True", "True"]


def _fields(options: BatchOptions) -> dict:
    return {name: getattr(options, name) for name in options.__dataclass_fields__}


def test_a_task_that_fails_before_its_prompt_is_sent_keeps_it(tmp_path: Path) -> None:
    """Issue 28: a task that fails in set-up still has its human turn, and says why."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "x", "prompt": "hello there", "model": "nosuch:model"}\n')
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TALARIA_HOME": str(tmp_path / "home")}
    done = talaria("batch", str(tasks), "--run-name", "f", "--output-dir", str(tmp_path / "data"),
                   env=env)
    assert done.returncode == 1, done.stderr
    assert "unknown provider 'nosuch'" in done.stderr.split("first in task x: ")[1].splitlines()[0]
    [line] = [json.loads(x) for x in (tmp_path / "data" / "f" / "trajectories.jsonl").read_text().splitlines()]
    assert line["conversations"][1] == {"from": "human", "value": "hello there"}
    assert parse_sharegpt(line)[1] == {"role": "user", "content": "hello there"}
