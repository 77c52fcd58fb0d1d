"""Talaria inside Harbor (issue 26 point 6), with the real `harbor` package (.venv-harbor,
Python 3.12: scripts/harbor-env), its Podman environment (podman-compose from the package
index) and the sample task `examples/harbor/hello-world`, offline.

`editors/harbor/talaria_harbor.py` installs Talaria in the task's container from the
wheelhouse `editors/harbor/wheels.py` makes from this checkout; Harbor's ACP runner drives
`talaria acp` there against the fake LLM (on this machine's loopback: the task's compose file
puts the container on the host's network). The reward is Harbor's verifier's, and the
trajectory is the one Harbor writes from the ACP session: tool calls, their results, tokens,
cost. Oracle and nop run through the same Harbor as the controls (1.0 and 0.0).

The task image's base is `tests/harbor_image.py` (no registry here): the sample tasks'
`FROM python:3.12-slim` is replaced by it, as the batch tests do with theirs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import ROOT, harbor_image
from tests.conftest import MISSING_TOOL
from tests.fakellm import FakeLLM

pytestmark = pytest.mark.slow
HARBOR_DIR = ROOT / "editors" / "harbor"
TASK = "hello-world"
TIMEOUT_S = 900
HOST_NETWORK = "services:\n  main:\n    network_mode: host\n"
"""The task's own compose file (Harbor's documented override): the fake LLM listens on this
machine's loopback, which a container reaches on the host's network only."""


@pytest.fixture(scope="module")
def harbor_venv() -> Path:
    if path := os.environ.get("TALARIA_HARBOR_VENV"):
        return Path(path)
    made = subprocess.run([str(ROOT / "scripts" / "harbor-env")], capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    if made.returncode != 0:
        pytest.skip(f"Harbor's environment is {MISSING_TOOL}: {made.stderr.strip()[-300:]}")
    return Path(made.stdout.strip())


@pytest.fixture(scope="module")
def base_image() -> str:
    if why := harbor_image.missing():
        pytest.skip(f"no task image here ({why})")
    return harbor_image.ensure_image()


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheelhouse for the image's Python (3.11, this interpreter's version)."""
    out = tmp_path_factory.mktemp("harbor") / "wheels"
    made = subprocess.run([sys.executable, str(HARBOR_DIR / "wheels.py"), str(out)],
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert made.returncode == 0, made.stderr
    return out


def task(tmp: Path, image: str) -> Path:
    where = tmp / "tasks" / TASK
    shutil.copytree(ROOT / "examples" / "harbor" / TASK, where)
    dockerfile = where / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace("FROM python:3.12-slim", f"FROM {image}"))
    (where / "environment" / "docker-compose.yaml").write_text(HOST_NETWORK)
    return where


def harbor(venv: Path, tmp: Path, task_dir: Path, *args: str) -> dict[str, Any]:
    """`harbor run` on one task; returns the trial's result.json, its directory under `dir`."""
    jobs = tmp / "jobs"
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(HARBOR_DIR), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "PYTHONDONTWRITEBYTECODE": "1"}  # no __pycache__ left in editors/harbor
    env.pop("VIRTUAL_ENV", None)
    command = [str(venv / "bin" / "harbor"), "run", "-p", str(task_dir), "-e", "podman",
               "-o", str(jobs), "-n", "1", "-q", "-y", *args]
    done = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    results = sorted(jobs.glob("*/*/result.json"))
    assert done.returncode == 0 and results, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    [result] = results
    data = json.loads(result.read_text())
    data["dir"] = result.parent
    return data


def reward(result: dict[str, Any]) -> float:
    assert result["exception_info"] is None, result["exception_info"]
    return float(result["verifier_result"]["rewards"]["reward"])


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as llm:
        yield llm


def usage(prompt: int, output: int, cached: int) -> dict[str, int]:
    return {"input_tokens": prompt, "output_tokens": output, "cache_read_tokens": cached}


def test_talaria_solves_the_sample_task_in_harbor_and_the_trajectory_is_whole(
        tmp_path: Path, harbor_venv: Path, base_image: str, wheels: Path, fake: FakeLLM) -> None:
    fake.script([
        {"tool_calls": [{"name": "write_file", "arguments": {
            "path": "/app/hello.txt", "content": "Hello, world!\n"}}], "usage": usage(1000, 40, 200)},
        {"tool_calls": [{"name": "terminal", "arguments": {"command": "cat /app/hello.txt"}}],
         "usage": usage(1100, 20, 900)},
        {"text": "Wrote /app/hello.txt.", "usage": usage(1200, 10, 1000)},
    ])
    result = harbor(harbor_venv, tmp_path, task(tmp_path, base_image),
                    "-a", "talaria_harbor:Talaria", "--ak", f"wheels={wheels}",
                    "-m", "openai/gpt-4o", "--ae", "OPENAI_API_KEY=sk-fake",
                    "--ae", f"OPENAI_BASE_URL={fake.openai_base_url}")
    assert reward(result) == 1.0
    assert fake.remaining == 0 and len(fake.requests) == 3
    assert "Create the file `/app/hello.txt`" in str(fake.requests[0]["json"]["messages"])

    agent = result["agent_result"]  # Harbor's tokens and cost: PromptResponse.usage, usage_update.cost
    assert (agent["n_input_tokens"], agent["n_output_tokens"], agent["n_cache_tokens"]) == (3300, 70, 2100)
    fresh, cached = 3300 - 2100, 2100
    assert agent["cost_usd"] == pytest.approx((fresh * 2.5 + cached * 1.25 + 70 * 10.0) / 1e6)
    acp = agent["metadata"]["acp"]
    assert acp["resolved_session_model_id"] == "openai:gpt-4o" and acp["error"] is None
    assert result["agent_info"]["name"] == "talaria"

    trajectory = json.loads((result["dir"] / "agent" / "trajectory.json").read_text())
    steps = [s for s in trajectory["steps"] if s["source"] == "agent"]
    calls = [c for s in steps for c in s.get("tool_calls") or []]
    # Named by ACP kind: the runner's SDK (agent-client-protocol 0.12) drops the unstable `name`.
    assert [c["function_name"] for c in calls] == ["edit", "execute"]
    assert calls[0]["arguments"] == {"path": "/app/hello.txt", "content": "Hello, world!\n"}
    assert calls[1]["arguments"]["command"] == "cat /app/hello.txt"
    observed = {r["source_call_id"]: r["content"] for s in steps
                for r in (s.get("observation") or {}).get("results", [])}
    assert set(observed) == {c["tool_call_id"] for c in calls}  # every call has its result
    assert json.loads(observed[calls[0]["tool_call_id"]])["bytes_written"] == 14  # rawOutput
    assert "Hello, world!" in observed[calls[1]["tool_call_id"]]  # the command's output
    assert steps[-1]["message"] == "Wrote /app/hello.txt."
    final = trajectory["final_metrics"]
    assert (final["total_prompt_tokens"], final["total_completion_tokens"]) == (3300, 70)
    assert final["total_cost_usd"] == pytest.approx(agent["cost_usd"])


@pytest.mark.parametrize("control, expected", [("oracle", 1.0), ("nop", 0.0)])
def test_the_controls_score_the_sample_task_through_the_same_harbor(
        tmp_path: Path, harbor_venv: Path, base_image: str, control: str, expected: float) -> None:
    result = harbor(harbor_venv, tmp_path, task(tmp_path, base_image), "-a", control)
    assert reward(result) == expected
