"""The Ray executor on a local Ray instance: same records, checkpoint and resume as local; a
task that kills its Ray worker is recorded, the others (in the same worker) run again.

Ray is an optional dependency: the module is skipped without it. Starting Ray takes seconds,
so one instance serves the module; the fake LLM starts first so Ray's workers inherit its URL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from talaria.agent.trajectories.batch.runner import BatchOptions, run_batch
from talaria.agent.trajectories.export.sharegpt import parse_sharegpt
from tests import ROOT
from tests.batchllm import RoutedLLM, script_turn

# One Ray at a time on this machine: the suite's parallel workers run these modules on one
# worker (scripts/test: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("ray")

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def ray_llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoutedLLM]:
    home = tmp_path_factory.mktemp("home")
    env = {"OPENAI_API_KEY": "sk-test", "TALARIA_HOME": str(home), "RAY_AUTH_MODE": "disabled"}
    saved = {k: os.environ.get(k) for k in [*env, "OPENAI_BASE_URL"]}
    with RoutedLLM(delay=0.2) as llm:
        os.environ.update(env, OPENAI_BASE_URL=llm.openai_base_url)
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            yield llm
        finally:
            ray.shutdown()
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def records(run_dir: Path) -> dict[str, dict]:
    lines = (run_dir / "trajectories.jsonl").read_text().splitlines()
    out = [json.loads(line) for line in lines]
    assert len({r["task_id"] for r in out}) == len(out), "duplicate task lines"
    return {r["task_id"]: r for r in out}


def test_ray_runs_isolated_tasks_with_checkpoint_and_resume(
    ray_llm: RoutedLLM, tmp_path: Path
) -> None:
    template = tmp_path / "template"
    template.mkdir()
    (template / "seed.txt").write_text("seed\n")
    first = [
        {"id": "a", "prompt": "write seed.txt from-a", "workspace": "template"},
        {"id": "b", "prompt": "write seed.txt from-b", "workspace": "template"},
        {"id": "f", "prompt": "fail"},
    ]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in first))
    options = BatchOptions(tasks_file=tasks, run_name="ray", output_dir=tmp_path / "data",
                           workers=2, model="openai:fake", executor="ray")
    ray_llm.meet = 2  # two workers at the model at once, however slowly the second starts
    try:
        result = run_batch(options, progress_out=None)
    finally:
        ray_llm.meet = 0
    got = records(result.run_dir)
    assert ray_llm.peak >= 2
    for task_id in "ab":  # the template travelled as tar bytes; each task had its own copy
        assert got[task_id]["status"] == "completed", got[task_id]
        assert parse_sharegpt(got[task_id])[-1]["content"] == f"read back: 1|from-{task_id}"
    assert (got["f"]["status"], got["f"]["reason"]) == ("failed", "provider_error")
    stats = json.loads((result.run_dir / "statistics.json").read_text())
    assert stats["run"]["executor"] == "ray" and stats["tasks"]["failed"] == 1

    # Two new tasks appear; --resume (executor and model from the checkpoint) runs only them.
    tasks.write_text(tasks.read_text() + "".join(
        json.dumps({"id": i, "prompt": "hello"}) + "\n" for i in ("c", "d")))
    ray_llm.prompts.clear()
    resumed = run_batch(BatchOptions(tasks_file=tasks, run_name="ray", workers=2,
                                     output_dir=tmp_path / "data", resume=True), progress_out=None)
    assert sorted(ray_llm.prompts) == ["hello", "hello"]
    assert resumed.ran == 2 and sorted(records(resumed.run_dir)) == ["a", "b", "c", "d", "f"]

    ray_llm.route = lambda body: {"text": "done"}
    retried = run_batch(BatchOptions(tasks_file=tasks, run_name="ray", workers=2,
                                     output_dir=tmp_path / "data", retry_failed=True),
                        progress_out=None)
    final = records(retried.run_dir)
    assert retried.ran == 1 and final["f"]["status"] == "completed"
    assert sorted(final) == ["a", "b", "c", "d", "f"]


def test_ray_is_not_imported_by_the_local_path() -> None:
    code = ("import sys, talaria.acp_server.cli.batch, talaria.agent.trajectories.batch.runner, talaria.agent.trajectories.batch.executors;"
            "assert 'ray' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)


def test_a_task_that_kills_its_ray_worker_is_recorded_and_the_rest_complete(
    ray_llm: RoutedLLM, tmp_path: Path
) -> None:
    ray_llm.route = script_turn
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in [
        {"id": "crash", "prompt": "crash"}, *({"id": f"ok{i}", "prompt": "hello"} for i in range(4))]))
    result = run_batch(BatchOptions(tasks_file=tasks, run_name="crash", output_dir=tmp_path / "data",
                                    workers=2, model="openai:fake", executor="ray"),
                       progress_out=None)
    got = records(result.run_dir)
    assert (got["crash"]["status"], got["crash"]["reason"]) == ("failed", "worker_crashed")
    assert "its Ray worker died 4 times" in got["crash"]["error"]
    assert all(got[f"ok{i}"]["status"] == "completed" for i in range(4))


def test_jobs_that_end_before_the_next_go_round_every_actor() -> None:
    # A fast model and a busy driver: each job ends before the next is taken. Always the first
    # of the equally free actors put a whole 400-job run on one node of two (seen under load).
    from talaria.agent.trajectories.batch.ray_executor import RayExecutor

    executor = RayExecutor(workers=4)
    actors = ["a", "b", "c", "d"]
    executor._free = dict.fromkeys(actors, 1)
    used = []
    for _ in range(8):
        actor = executor._take()
        used.append(actor)
        executor._give_back(actor)
    assert used == actors * 2
    busy = executor._take()  # and a busy actor is not taken while another is free
    assert executor._take() != busy
