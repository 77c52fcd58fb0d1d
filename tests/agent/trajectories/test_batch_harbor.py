"""Harbor task directories end to end: the samples in examples/harbor, each in a real podman
container built from its Dockerfile (FROM the local test image: no registry here), and on
this machine with Harbor's paths mapped. The oracle scores 1 everywhere, nop 0; a broken
dataset is named; the agent's files reach the image's WORKDIR.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import env_image
from talaria.agent.trajectories.batch.harbor import copies_of, load_harbor
from talaria.agent.trajectories.batch.images import context_hash
from tests import ROOT
from tests.batchllm import RoutedLLM

EXAMPLES = ROOT / "examples" / "harbor"


@pytest.fixture(scope="module")
def image() -> str:
    why = env_image.missing()
    if why:
        pytest.skip(f"docker environment: no real engine here ({why})")
    return env_image.ensure_image()


def dataset(tmp_path: Path, image: str | None, names: tuple[str, ...] = ()) -> Path:
    """A copy of the samples (only `names`, if given), built FROM the local test image."""
    root = tmp_path / "dataset"
    for task in sorted(EXAMPLES.iterdir()):
        if not names or task.name in names:
            shutil.copytree(task, root / task.name)
    for dockerfile in root.glob("*/environment/Dockerfile"):
        if image:
            text = dockerfile.read_text()
            dockerfile.write_text("\n".join(f"FROM {image}" if line.startswith("FROM ") else line
                                            for line in text.splitlines()) + "\n")
    return root


def batch(*args: str, home: Path, cwd: Path, env: dict[str, str] | None = None
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "talaria.acp_server.cli.main", "batch", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=600,
                          env={"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(home),
                               "TALARIA_HOME": str(home), "PYTHONPATH": str(ROOT), **(env or {})})


def records(run_dir: Path) -> dict[str, dict]:
    lines = (run_dir / "trajectories.jsonl").read_text().splitlines()
    return {json.loads(x)["task_id"]: json.loads(x) for x in lines}


def containers(under: Path) -> list[str]:
    """Talaria's containers that mount something under `under` (other tests' are not ours)."""
    out = subprocess.run(["podman", "ps", "-a", "--filter", "label=talaria.environment",
                          "--format", "{{.Names}} {{.Mounts}}"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if str(under) in line]


def test_the_samples_load_with_their_settings() -> None:
    tasks = {t.id: t for t in load_harbor(EXAMPLES)}
    assert sorted(tasks) == ["fix-config", "fizzbuzz", "hello-world"]
    hello = tasks["hello-world"]
    assert hello.prompt.startswith("Create the file `/app/hello.txt`")
    assert hello.timeout == 300.0 and hello.check is not None and hello.check["timeout"] == 60.0
    assert hello.tags == ("trivial", "shell", "category:files", "difficulty:easy")
    assert hello.source is not None
    assert hello.source["workdir"] == "/app"
    assert hello.source["resources"] == {"network": True, "cpus": 1, "memory": "512m"}
    assert tasks["fizzbuzz"].source["resources"]["network"] is False  # type: ignore[index]
    assert hello.solution and hello.tests and Path(hello.tests, "test.sh").is_file()


def test_oracle_and_nop_in_containers(tmp_path: Path, image: str) -> None:
    data = dataset(tmp_path, image)
    home = tmp_path / "home"
    oracle = batch(str(data), "--run-name", "oracle", "--agent", "oracle", "--workers", "2",
                   home=home, cwd=tmp_path)
    assert oracle.returncode == 0, oracle.stderr
    assert "verified: 3 of 3 attempts resolved (pass@1 1.000)" in oracle.stderr
    got = records(tmp_path / "data" / "oracle")
    assert {k: r["reward"] for k, r in got.items()} == {
        "fix-config": 1.0, "fizzbuzz": 1.0, "hello-world": 1.0}
    assert got["fizzbuzz"]["verifier"]["source"] == "reward.json"
    assert got["fix-config"]["verifier"]["output_tail"] == "app.ini is right\n"
    assert all(r["agent"] == "oracle" for r in got.values())
    tag = f"localhost/talaria-task:{context_hash(data / 'fix-config' / 'environment')}"
    created = subprocess.run(["podman", "image", "inspect", "--format", "{{.Created}}", tag],
                             capture_output=True, text=True, check=True).stdout

    nop = batch(str(data), "--run-name", "nop", "--agent", "nop", "--workers", "3",
                home=home, cwd=tmp_path)
    assert nop.returncode == 0, nop.stderr
    got = records(tmp_path / "data" / "nop")
    assert {k: (r["reward"], r["status"]) for k, r in got.items()} == {
        "fix-config": (0.0, "completed"), "fizzbuzz": (0.0, "completed"),
        "hello-world": (0.0, "completed")}
    assert "port is not 8080" in got["fix-config"]["verifier"]["output_tail"]
    # The image was built once, by content: the second run found it.
    again = subprocess.run(["podman", "image", "inspect", "--format", "{{.Created}}", tag],
                           capture_output=True, text=True, check=True).stdout
    assert again == created
    assert containers(tmp_path) == []  # every task's container went with it


def test_control_agents_name_broken_tasks(tmp_path: Path, image: str) -> None:
    data = dataset(tmp_path, image, ("hello-world", "fix-config"))
    (data / "hello-world" / "solution" / "solve.sh").write_text("echo 'Hello world' > /app/hello.txt\n")
    (data / "fix-config" / "tests" / "test.sh").write_text(
        "mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\n")
    home = tmp_path / "home"
    oracle = batch(str(data), "--run-name", "o", "--agent", "oracle", home=home, cwd=tmp_path)
    assert oracle.returncode == 1
    assert ("talaria: broken tasks: the oracle did not score 1 on 1 task(s): hello-world"
            in oracle.stderr)
    nop = batch(str(data), "--run-name", "n", "--agent", "nop", home=home, cwd=tmp_path)
    assert nop.returncode == 1
    assert "a check passed with no agent (nop) on 1 task(s): fix-config" in nop.stderr


def test_mapped_paths_on_this_machine(tmp_path: Path) -> None:
    # fix-config starts from the app.ini its Dockerfile COPYs into /app: copied here too.
    data = dataset(tmp_path, None)
    home = tmp_path / "home"
    done = batch(str(data), "--run-name", "local", "--agent", "oracle", "--env", "local",
                 home=home, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    got = records(tmp_path / "data" / "local")
    assert {k: r["resolved"] for k, r in got.items()} == {
        "fix-config": True, "fizzbuzz": True, "hello-world": True}
    assert not Path("/app/hello.txt").exists() and not Path("/logs/verifier").exists()
    nop = batch(str(data), "--run-name", "nop", "--agent", "nop", "--env", "local",
                home=home, cwd=tmp_path)
    assert nop.returncode == 0, nop.stderr
    assert not any(r["resolved"] for r in records(tmp_path / "data" / "nop").values())


@pytest.mark.parametrize("dockerfile, expected", [
    ("FROM x\nWORKDIR /app\nCOPY app.ini /app/app.ini\n", [("app.ini", "app.ini")]),
    ("FROM x\nWORKDIR /app\nCOPY a.py b.py ./\n", [("a.py", ""), ("b.py", "")]),
    ("FROM x\nWORKDIR /app\nCOPY . .\n", [(".", "")]),
    ("FROM x\nWORKDIR /srv\nWORKDIR app\nCOPY [\"src\", \"/srv/app/src/\"]\n",
     [("src", "src/")]),
    ("FROM x\nWORKDIR /app\nCOPY --chown=1:1 \\\n  conf/ /app/conf/\n", [("conf/", "conf/")]),
    ("FROM x\nWORKDIR /app\nCOPY --from=build /out /app/out\nCOPY tool /usr/bin/tool\n"
     "ADD https://example.com/f /app/f\nCOPY $X /app/x\n", []),
    ("FROM x\nCOPY a /a\n", []),
])
def test_the_dockerfiles_copies_into_its_workdir(tmp_path: Path, dockerfile: str,
                                                  expected: list) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text(dockerfile)
    assert copies_of(path) == expected


def test_the_agent_works_in_the_images_workdir(tmp_path: Path, image: str) -> None:
    data = dataset(tmp_path, image, ("hello-world",))
    # The fake model's script: `write PATH TEXT` writes PATH (relative: the workspace).
    (data / "hello-world" / "instruction.md").write_text("write hello.txt Hello, world!")
    home = tmp_path / "home"
    with RoutedLLM() as llm:
        done = batch(str(data), "--run-name", "agent", "--model", "openai:fake",
                     home=home, cwd=tmp_path,
                     env={"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": llm.openai_base_url})
    assert done.returncode == 0, done.stderr
    record = records(tmp_path / "data" / "agent")["hello-world"]
    assert (record["status"], record["resolved"]) == ("completed", True), record["verifier"]
    assert record["turns"] == 3


@pytest.mark.parametrize("change, message", [
    (lambda t: (t / "instruction.md").unlink(),
     "hello-world: no instruction.md (every Harbor task directory has one: the prompt)"),
    (lambda t: (t / "task.toml").write_text("[verifier]\ntimeout_secs = 10\n"),
     "unknown key 'timeout_secs' in [verifier] (did you mean 'timeout_sec'?)"),
    (lambda t: (t / "task.toml").write_text("[agent]\ntimeout_sec = \"ten\"\n"),
     "[agent] timeout_sec must be a number >= 0, not 'ten'"),
    (lambda t: (t / "task.toml").write_text("[enviroment]\ncpus = 1\n"),
     "unknown key 'enviroment' in the top level (did you mean 'environment'?)"),
    (lambda t: (t / "tests" / "test.sh").unlink(), "hello-world: no tests/test.sh"),
    (lambda t: (t / "task.toml").write_text("[environment]\ngpus = 1\n"), "GPUs are not supported"),
])
def test_bad_task_directories_are_one_line_and_lose_nothing(tmp_path: Path, change, message) -> None:
    data = dataset(tmp_path, None, ("hello-world",))
    home = tmp_path / "home"
    first = batch(str(data), "--run-name", "r", "--agent", "oracle", "--env", "local",
                  home=home, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    before = (tmp_path / "data" / "r" / "trajectories.jsonl").read_bytes()
    change(data / "hello-world")
    bad = batch(str(data), "--run-name", "r", "--resume", home=home, cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and message in bad.stderr, bad.stderr
    assert bad.stderr.startswith(f"talaria: {data / 'hello-world'}")
    assert (tmp_path / "data" / "r" / "trajectories.jsonl").read_bytes() == before
