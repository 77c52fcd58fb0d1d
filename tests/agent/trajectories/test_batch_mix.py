"""`talaria batch --toolset-mix`: a toolset drawn per task (seeded, the same on --resume),
recorded on each line and in the checkpoint, with statistics per arm. End to end with the
fake LLM, which answers by the tools it is offered (the arm really changes the tools)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from talaria.agent.trajectories.batch.mix import DEFAULT_SEED, parse_mix
from talaria.agent.trajectories.batch.runner import BatchOptions, run_batch
from talaria.agent.trajectories.report import load_batch, render_batch
from tests import ROOT
from tests.batchllm import RoutedLLM, tool_results

MIX = "core=0.5, core-execute_code=0.5"


def offered(body: dict) -> set[str]:
    return {(t.get("function") or t).get("name") for t in body.get("tools") or ()}


def route(body: dict) -> dict:
    """Solves the task only when execute_code is offered (the "core" arm)."""
    if tool_results(body):
        return {"text": "done"}
    text = "ok" if "execute_code" in offered(body) else "no"
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": text}}]}


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[RoutedLLM]:
    (tmp_path / "home").mkdir()
    with RoutedLLM(route) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("TALARIA_HOME", str(tmp_path / "home"))
        yield server


def test_a_mix_is_parsed_and_checked() -> None:
    mix = parse_mix(MIX)
    assert mix.spec == "core=0.5,core-execute_code=0.5"
    core, without = mix.arms
    assert "execute_code" in core.tools and "execute_code" not in without.tools
    assert set(core.tools) - set(without.tools) == {"execute_code"}
    assert parse_mix("core+web=3,read_file+write_file=1").shares() == {
        "core+web": 0.75, "read_file+write_file": 0.25}
    bad = {
        "core+execute_code=0.5,core=0.5": "give the same tools",  # core holds execute_code
        "core=0,core-todo=1": "the weight must be a positive number",
        "core=-1,core-todo=1": "the weight must be a positive number",
        "core=nan,core-todo=1": "the weight must be a positive number",
        "core=1,nope=1": "unknown toolset 'nope'",
        "core": "write ARM=WEIGHT",
        "core=1,core=2": "names the arm 'core' twice",
        "core-core=1": "the arm leaves no tools",
        "core+=1": "names joined by + and -",
        " , ": "--toolset-mix is empty",
    }
    for spec, message in bad.items():
        with pytest.raises(ValueError, match=message.replace("+", r"\+")):
            parse_mix(spec)


def test_the_draw_is_deterministic_per_task_and_follows_the_weights() -> None:
    mix = parse_mix("core=3,core-execute_code=1")
    ids = [f"task-{i}" for i in range(4000)]
    first = [mix.choose(i, 7).label for i in ids]
    assert first == [mix.choose(i, 7).label for i in ids]  # any order, any process: the same
    assert [mix.choose(i, 7).label for i in reversed(ids)] == first[::-1]
    share = Counter(first)["core"] / len(ids)
    assert 0.72 < share < 0.78  # 3 : 1
    other_seed = [mix.choose(i, 8).label for i in ids]
    assert other_seed != first and 0.72 < Counter(other_seed)["core"] / len(ids) < 0.78


def test_each_task_runs_with_its_arm_and_statistics_break_down_by_arm(llm: RoutedLLM, tmp_path: Path) -> None:
    first_requests: list[set[str]] = []

    def recording(body: dict) -> dict:
        if not tool_results(body):
            first_requests.append(offered(body))
        return route(body)

    llm.route = recording
    tasks = tmp_path / "tasks.jsonl"
    rows = [{"id": f"t{i}", "prompt": f"task {i}", "check": 'test "$(cat out.txt)" = ok'}
            for i in range(10)]
    rows.append({"id": "own", "prompt": "own tools", "toolsets": ["read_file", "write_file"],
                 "check": "true"})
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    options = BatchOptions(tasks_file=tasks, run_name="mix", output_dir=tmp_path / "data",
                           workers=2, model="openai:fake", toolset_mix=MIX, seed=11)
    result = run_batch(options, progress_out=None)
    mix = parse_mix(MIX)
    arms = {f"t{i}": mix.choose(f"t{i}", 11).label for i in range(10)}
    assert set(arms.values()) == {"core", "core-execute_code"}  # both arms drawn at this seed
    got = {r["task_id"]: r for r in map(json.loads, (result.run_dir / "trajectories.jsonl").open())}
    for task, arm in arms.items():
        assert got[task]["toolsets"] == arm
        assert got[task]["resolved"] is (arm == "core"), (task, arm)
    assert got["own"]["toolsets"] == "read_file,write_file"  # a task's own toolsets win
    # What the model was offered: execute_code only in the core arm's requests.
    assert len(first_requests) == 11
    assert sum("execute_code" in tools for tools in first_requests) == Counter(arms.values())["core"]
    checkpoint = json.loads((result.run_dir / "checkpoint.json").read_text())
    assert checkpoint["toolset_arms"] == arms
    assert (checkpoint["options"]["toolset_mix"], checkpoint["options"]["seed"]) == (mix.spec, 11)
    stats = json.loads((result.run_dir / "statistics.json").read_text())
    counts = Counter(arms.values())
    assert stats["toolset_mix"]["arms"]["core"] | {"tools": None} == {
        "weight": 0.5, "share": 0.5, "tools": None, "tasks": counts["core"]}
    by = stats["verification"]["by_toolset"]
    assert by["core"]["resolved_rate"] == 1.0 and by["core-execute_code"]["resolved_rate"] == 0.0
    assert by["core"]["attempts"] == counts["core"] and by["read_file,write_file"]["attempts"] == 1
    assert by["core"]["turns"] == {"mean": 2.0, "per_solved_task": 2.0}
    assert by["core-execute_code"]["turns"]["per_solved_task"] is None  # nothing solved
    page = render_batch(*load_batch(result.run_dir))
    assert "Toolset mix" in page and "core-execute_code" in page and "seed 11" in page

    # --resume with more attempts: the new attempts draw the same arms, seed from the run.
    again = run_batch(BatchOptions(tasks_file=tasks, run_name="mix", output_dir=tmp_path / "data",
                                   workers=2, resume=True, attempts=2), progress_out=None)
    assert again.ran == 11
    lines = [json.loads(x) for x in (again.run_dir / "trajectories.jsonl").read_text().splitlines()]
    second = {r["task_id"]: r["toolsets"] for r in lines if r["attempt"] == 2}
    assert second == {**arms, "own": "read_file,write_file"}
    # A resume that would change the draw is refused, the run untouched.
    before = (again.run_dir / "trajectories.jsonl").read_bytes()
    for change, message in (({"toolset_mix": "core=1,core-execute_code=3"}, "started with --toolset-mix"),
                            ({"seed": 12}, "started with --toolset-mix"),
                            ({"toolsets": ("core",)}, "cannot be combined")):
        with pytest.raises(ValueError, match=message):
            run_batch(BatchOptions(tasks_file=tasks, run_name="mix", output_dir=tmp_path / "data",
                                   resume=True, attempts=3, **change), progress_out=None)  # type: ignore[arg-type]
    assert (again.run_dir / "trajectories.jsonl").read_bytes() == before


def test_a_mix_without_seed_records_the_default_and_bad_mixes_are_one_line(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "a", "prompt": "x", "check": "false"}) + "\n")
    env = {**os.environ, "TALARIA_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}

    def talaria(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "talaria.acp_server.cli.main", "batch",
                               str(tasks), "--output-dir", str(tmp_path / "data"), *args],
                              capture_output=True, text=True, env=env, timeout=120)

    for args, message in (
        (("--toolset-mix", "core+execute_code=0.5,core=0.5"), "give the same tools"),
        (("--toolset-mix", "core=1,web-search=1"), "unknown toolset 'search'"),
        (("--toolset-mix", "core=1,core-todo=1", "--toolsets", "core"), "cannot be combined"),
        (("--seed", "3"), "--seed seeds --toolset-mix"),
    ):
        done = talaria("--run-name", "bad", *args)
        assert done.returncode == 2, done.stderr
        assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "data" / "bad").exists()
    done = talaria("--run-name", "nop", "--agent", "nop", "--toolset-mix", "core=1,core-todo=1")
    assert done.returncode == 0, done.stderr
    checkpoint = json.loads((tmp_path / "data" / "nop" / "checkpoint.json").read_text())
    assert checkpoint["options"]["seed"] == DEFAULT_SEED
    arm = parse_mix("core=1,core-todo=1").choose("a", DEFAULT_SEED).label
    assert checkpoint["toolset_arms"] == {"a": arm}
