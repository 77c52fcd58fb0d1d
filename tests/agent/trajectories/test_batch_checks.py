"""The parts of a verdict without running tasks: check keys, pass@k, reward files, test logs."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from talaria.agent.trajectories.batch.checks import check_of
from talaria.agent.trajectories.batch.tasks import TaskFileError, load_tasks
from talaria.agent.trajectories.batch.testlog import statuses
from talaria.agent.trajectories.batch.verdicts import mean_std, pass_at_k
from talaria.agent.trajectories.batch.verifier import reward_of, split_output
from tests import ROOT


def test_a_check_is_a_command() -> None:
    assert check_of("pytest -q", "t:1") == {"command": "pytest -q", "timeout": 600.0, "env": {}}
    assert check_of({"command": "x", "timeout": 5, "env": {"A": 1}}, "t:1") == {
        "command": "x", "timeout": 5.0, "env": {"A": "1"}}


@pytest.mark.parametrize("check, message", [
    (5, "must be a shell command"), (["pytest", "-q"], "not a list"),
    ({"cmd": "x"}, "unknown key 'cmd' in \"check\""), ({"command": ""}, "needs \"command\""),
    ({"command": "x", "timeout": 0}, "check.timeout\" must be seconds"),
    ({"command": "x", "env": {"1A": "b"}}, "env must map variable names"),
])
def test_bad_checks_name_the_line(tmp_path: Path, check: object, message: str) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"prompt": "p"}) + "\n" + json.dumps({"prompt": "p", "check": check}) + "\n")
    with pytest.raises(TaskFileError, match=f"tasks.jsonl:2: .*{message}"):
        load_tasks(path)


def test_the_cli_says_a_bad_check_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"prompt": "p", "check": ["make", "test"]}) + "\n")
    done = subprocess.run([sys.executable, "-m", "talaria.acp_server.cli.main", "batch", str(path),
                           "--run-name", "r"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT),
                                            "TALARIA_HOME": str(tmp_path / "home")})
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "tasks.jsonl:1: \"check\" is a shell command string, not a list" in done.stderr
    assert not (tmp_path / "data").exists()


def test_pass_at_k_is_the_unbiased_estimator() -> None:
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12)
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


def test_pass_at_k_estimates_the_true_rate_on_a_synthetic_dataset() -> None:
    # Tasks with known success probabilities p: E[pass@k estimate] = 1 - (1 - p)^k exactly.
    rng = random.Random(7)
    probabilities = [0.0, 0.1, 0.35, 0.5, 0.9, 1.0]
    n, k, trials = 10, 3, 4000
    for p in probabilities:
        estimates = [pass_at_k(n, sum(rng.random() < p for _ in range(n)), k) for _ in range(trials)]
        assert sum(estimates) / trials == pytest.approx(1 - (1 - p) ** k, abs=0.02)


def test_mean_and_sample_std() -> None:
    assert mean_std([1.0, 0.0, 1.0]) == {"mean": round(2 / 3, 6), "std": round(math.sqrt(1 / 3), 6)}
    assert mean_std([0.5]) == {"mean": 0.5, "std": None}


def test_rewards_from_files_and_exit_status() -> None:
    mark = "@@talaria-verifier-4c1e@@"
    text = f"ran\n{mark} exit 3\n{mark} reward.txt\n0.75\n{mark} reward.json\n"
    output, code, rewards = split_output(text)
    assert (output, code, rewards) == ("ran", 3, {"reward.txt": "0.75"})
    assert reward_of(rewards, code) == (0.75, "reward.txt")
    assert reward_of({"reward.json": '{"accuracy": 0.5}'}, 1) == (0.5, "reward.json")
    assert reward_of({}, 0) == (1.0, "exit_status") and reward_of({}, 2) == (0.0, "exit_status")
    for bad, message in (({"reward.txt": "1.5"}, "outside"), ({"reward.json": "[1]"}, "no \"reward\""),
                         ({"reward.json": "{"}, "not JSON")):
        with pytest.raises(ValueError, match=message):
            reward_of(bad, 0)
    assert split_output("killed before the end")[1] is None


def test_test_logs_of_pytest_and_unittest() -> None:
    found = statuses("PASSED t.py::test_a\nFAILED t.py::test_b - AssertionError\n"
                     "t.py::test_c PASSED [ 50%]\nt.py::test_d ERROR\n"
                     "test_x (pkg.T.test_x) ... ok\ntest_y (pkg.T.test_y)\nDoc line. ... FAIL\n"
                     "test_z (pkg.T) ... ERROR\n")
    assert found == {"t.py::test_a": "PASSED", "t.py::test_b": "FAILED", "t.py::test_c": "PASSED",
                     "t.py::test_d": "ERROR", "pkg.T.test_x": "PASSED", "test_x (pkg.T)": "PASSED",
                     "pkg.T.test_y": "FAILED", "test_y (pkg.T)": "FAILED", "pkg.T.test_z": "ERROR",
                     "test_z (pkg.T)": "ERROR"}
    assert statuses("PASSED t.py::a\nERROR t.py::a - teardown\n") == {"t.py::a": "ERROR"}
