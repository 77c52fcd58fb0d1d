"""SWE-bench instances end to end: the samples in examples/swebench against a real git
repository (made by make_repos.sh), real checkouts, real test runs graded per test id."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from talaria.agent.trajectories.batch.runner import BatchOptions, run_batch
from talaria.agent.trajectories.batch.swebench import checkout, load_swebench
from talaria.agent.trajectories.batch.tasks import TaskFileError
from tests import ROOT
from tests.batchllm import RoutedLLM, prompt_of, tool_results

SAMPLES = ROOT / "examples" / "swebench"
INSTANCES = SAMPLES / "instances.jsonl"
FIXED_ADD = '"""Arithmetic on two numbers."""\n\n\ndef add(a, b):\n    return a + b\n\n\n' \
            'def mul(a, b):\n    return a * b\n\n\ndef divide(a, b):\n    return a / b\n'


@pytest.fixture(scope="module")
def repos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("repos")
    made = subprocess.run(["sh", str(SAMPLES / "make_repos.sh"), str(root)], capture_output=True,
                          text=True, check=True)
    base = json.loads(INSTANCES.read_text().splitlines()[0])["base_commit"]
    assert made.stdout.strip() == base  # the same commit on every machine
    return root


def lines(run_dir: Path) -> dict[str, dict]:
    out = [json.loads(x) for x in (run_dir / "trajectories.jsonl").read_text().splitlines()]
    return {r["task_id"]: r for r in out}


def test_oracle_resolves_and_nop_names_the_failing_tests(repos: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TALARIA_HOME", str(tmp_path / "home"))
    for agent in ("oracle", "nop"):
        result = run_batch(BatchOptions(tasks_file=INSTANCES, run_name=agent, repos=repos,
                                        output_dir=tmp_path / "data", agent=agent, workers=2),
                           progress_out=None)
        got = lines(result.run_dir)
        assert sorted(got) == ["example__calc-1", "example__calc-2"]
        for record in got.values():
            tests = record["verifier"]["tests"]
            assert record["resolved"] is (agent == "oracle"), record["verifier"]
            assert (tests["total"], tests["missing"]) == (3, [])
            assert tests["pass_to_pass_passed"] == 2  # the old tests pass either way
            assert record["tags"][0] == "repo:example/calc"
        if agent == "nop":
            assert got["example__calc-1"]["verifier"]["tests"]["failed"] == [
                "tests.test_ops.TestAdd.test_add"]
            assert got["example__calc-2"]["verifier"]["tests"]["failed"] == [
                "tests.test_ops.TestDivide.test_divide_by_zero"]
    stats = json.loads((result.run_dir / "statistics.json").read_text())["verification"]
    assert stats["by_tag"]["repo:example/calc"]["resolved"] == 0


def test_an_agents_fix_is_graded_by_the_instance_tests(repos: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def route(body: dict) -> dict:
        prompt, results = prompt_of(body), tool_results(body)
        if results:
            return {"text": "done"}
        if prompt.startswith("calc.ops.add"):  # a real fix
            return {"tool_calls": [{"name": "write_file",
                                    "arguments": {"path": "calc/ops.py", "content": FIXED_ADD}}]}
        # A "fix" that only edits the tests: the check puts them back before it runs them.
        return {"tool_calls": [{"name": "terminal", "arguments": {
            "command": "printf 'import unittest\\n' > tests/test_ops.py && git status --short"}}]}

    with RoutedLLM(route) as llm:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", llm.openai_base_url)
        monkeypatch.setenv("TALARIA_HOME", str(tmp_path / "home"))
        result = run_batch(BatchOptions(tasks_file=INSTANCES, run_name="agent", repos=repos,
                                        output_dir=tmp_path / "data", model="openai:fake",
                                        workers=2), progress_out=None)
    got = lines(result.run_dir)
    assert got["example__calc-1"]["resolved"] is True, got["example__calc-1"]["verifier"]
    cheat = got["example__calc-2"]
    assert cheat["status"] == "completed" and cheat["resolved"] is False
    assert cheat["verifier"]["tests"]["failed"] == ["tests.test_ops.TestDivide.test_divide_by_zero"]
    assert cheat["verifier"]["tests"]["pass_to_pass_passed"] == 2


def test_a_checkout_reaches_no_later_commit(repos: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", str(repos / "example__calc"), str(repo)], check=True)
    base = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                          text=True, check=True).stdout.strip()
    (repo / "LATER").write_text("the fix lives here\n")
    subprocess.run(["git", "add", "LATER"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "later"],
                   cwd=repo, check=True)
    subprocess.run(["git", "tag", "v2"], cwd=repo, check=True)
    workspace = tmp_path / "ws"
    checkout({"repo_dir": str(repo), "base_commit": base}, workspace)
    log = subprocess.run(["git", "log", "--all", "--format=%H"], cwd=workspace,
                         capture_output=True, text=True, check=True).stdout.split()
    assert log == [base] and not (workspace / "LATER").exists()


@pytest.mark.parametrize("edit, message", [
    (lambda d: {**d, "base_commit": "0123456789abcdef0123456789abcdef01234567"},
     "base_commit 0123456789abcdef0123456789abcdef01234567 is not in"),
    (lambda d: {**d, "FAIL_TO_PASS": "not json"}, "FAIL_TO_PASS must be a list of test ids"),
    (lambda d: {**d, "PASS_TO_PAS": []}, "unknown key 'PASS_TO_PAS' (did you mean 'PASS_TO_PASS'?)"),
    (lambda d: {k: v for k, v in d.items() if k != "test_patch"}, "no 'test_patch'"),
    (lambda d: {**d, "repo": "example/missing"}, "no clone of example/missing in"),
])
def test_bad_instances_are_one_line(repos: Path, tmp_path: Path, edit, message: str) -> None:
    good, second = INSTANCES.read_text().splitlines()
    path = tmp_path / "instances.jsonl"
    path.write_text(good + "\n" + json.dumps(edit(json.loads(second))) + "\n")
    with pytest.raises(TaskFileError, match=f"instances.jsonl:2: .*{re.escape(message)}"):
        load_swebench(path, repos)


def test_the_cli_refuses_a_missing_commit_and_keeps_the_run(repos: Path, tmp_path: Path) -> None:
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path),
           "TALARIA_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}

    def batch(path: Path, *more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "talaria.acp_server.cli.main", "batch",
                               str(path), "--repos", str(repos), "--run-name", "r", *more],
                              capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)

    assert batch(INSTANCES, "--agent", "nop").returncode == 0
    before = (tmp_path / "data" / "r" / "trajectories.jsonl").read_bytes()
    bad = tmp_path / "bad.jsonl"
    data = json.loads(INSTANCES.read_text().splitlines()[0])
    bad.write_text(json.dumps({**data, "base_commit": "f" * 40}) + "\n")
    refused = batch(bad, "--resume")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert f"bad.jsonl:1: base_commit {'f' * 40} is not in" in refused.stderr
    assert "fetch origin" in refused.stderr
    no_repos = subprocess.run([sys.executable, "-m", "talaria.acp_server.cli.main", "batch",
                               str(INSTANCES), "--run-name", "x"], capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=300)
    assert no_repos.returncode == 2 and "need --repos DIR" in no_repos.stderr
    assert (tmp_path / "data" / "r" / "trajectories.jsonl").read_bytes() == before
