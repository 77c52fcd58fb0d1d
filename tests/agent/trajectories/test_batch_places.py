"""The check runs where the task ran: a real podman container (Harbor's paths as they are) and
a real sshd on loopback (the files live in the remote copy; tests travel through the
environment, binary ones too)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import env_image
from benchmarks.env_sshd import Sshd
from benchmarks.env_sshd import missing as sshd_missing
from talaria.agent.trajectories.batch.runner import BatchOptions, run_batch
from tests.batchllm import RoutedLLM

BINARY = bytes(range(256)) * 3
DIGEST = hashlib.sha256(BINARY).hexdigest()


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[RoutedLLM]:
    with RoutedLLM() as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("TALARIA_HOME", str(tmp_path / "home"))
        (tmp_path / "home").mkdir()
        yield server


def hidden_tests(tmp_path: Path) -> Path:
    tests = tmp_path / "hidden"
    tests.mkdir()
    (tests / "data.bin").write_bytes(BINARY)
    (tests / "run.sh").write_text("#!/bin/sh\necho ran-the-tests\n")
    (tests / "run.sh").chmod(0o755)
    return tests


def run(tmp_path: Path, tasks: list[dict]) -> dict[str, dict]:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    result = run_batch(BatchOptions(tasks_file=path, run_name="p", output_dir=tmp_path / "data",
                                    workers=2, model="openai:fake"), progress_out=None)
    lines = (result.run_dir / "trajectories.jsonl").read_text().splitlines()
    return {json.loads(x)["task_id"]: json.loads(x) for x in lines}


def test_checks_run_in_the_tasks_container(llm: RoutedLLM, tmp_path: Path) -> None:
    why = env_image.missing()
    if why:
        pytest.skip(f"docker environment: no real engine here ({why})")
    image = env_image.ensure_image()
    hidden_tests(tmp_path)
    got = run(tmp_path, [
        {"id": "box", "prompt": "write out.txt hello", "environment": f"docker:{image}",
         "tests": "hidden",
         "check": f"/tests/run.sh && sha256sum /tests/data.bin | grep -q {DIGEST} && "
                  "test \"$(cat out.txt)\" = hello && "
                  "echo 0.75 > /logs/verifier/reward.txt && test ! -e .talaria-verifier/tests"},
    ])
    record = got["box"]
    assert record["status"] == "completed", record
    assert (record["reward"], record["verifier"]["source"]) == (0.75, "reward.txt"), record["verifier"]
    assert record["verifier"]["output_tail"] == "ran-the-tests\n"


def test_checks_run_in_the_remote_copy_over_ssh(llm: RoutedLLM, tmp_path: Path) -> None:
    why = sshd_missing()
    if why:
        pytest.skip(f"ssh environment: no real sshd here ({why})")
    hidden_tests(tmp_path)
    remote = tmp_path / "remote"
    with Sshd(tmp_path / "sshd") as server:
        table = server.table(workdir=remote)
        (tmp_path / "home" / "config.toml").write_text(
            "[environments.ssh]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in table.items()))
        got = run(tmp_path, [
            {"id": "far", "prompt": "write out.txt hello", "environment": "ssh", "tests": "hidden",
             "check": {"command": 'case "$PWD" in "$REMOTE"*) ;; *) exit 9;; esac; '
                                  'test "$(cat out.txt)" = hello && /tests/run.sh && '
                                  f'sha256sum "$TEST_DIR/data.bin" | grep -q {DIGEST}',
                       "env": {"REMOTE": str(remote)}}},
        ])
    record = got["far"]
    assert record["status"] == "completed", record
    assert record["resolved"] is True, record["verifier"]
    assert record["verifier"]["output_tail"] == "ran-the-tests\n"
