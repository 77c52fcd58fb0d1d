"""Picking an environment from every door: config.toml and TALARIA_ENVIRONMENT, `talaria run
--env`, a batch task's "environment" field (a container per task, none left after), the ACP
config option, the LSP door (the host's environment, as ACP's), `talaria env check`; bad names
and missing engines are one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.env_sshd import Sshd
from talaria.agent.config import describe, load_config
from talaria.agent.trajectories.batch.runner import BatchOptions, run_batch, task_dir_name
from tests import ROOT
from tests.acp_harness import Editor
from tests.batchllm import RoutedLLM


def llm_call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def containers(under: Path | None = None) -> list[str]:
    """Talaria's containers; with `under`, only those mounting something under it (the suite's
    parallel workers run other tests' containers at the same time)."""
    out = subprocess.run(["podman", "ps", "-a", "--filter", "label=talaria.environment",
                          "--format", "{{.Names}} {{.Mounts}}"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines()
            if line.strip() and (under is None or str(under) in line)]


def talaria(*args: str, home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "talaria.acp_server.cli.main", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=300,
                          env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home),
                               "TALARIA_HOME": str(home), "PYTHONPATH": str(ROOT)})


def test_config_names_and_tables(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        'environment = "gpu"\n[environments.gpu]\nbackend = "ssh"\nhost = "gpu-1"\n')
    config = load_config(env={"TALARIA_HOME": str(tmp_path)})
    assert config.environment == "gpu" and config.environments["gpu"]["host"] == "gpu-1"
    assert ("environments.gpu.host", "gpu-1", "config.toml") in describe(config, env={})
    assert load_config(env={"TALARIA_HOME": str(tmp_path),
                            "TALARIA_ENVIRONMENT": "docker:img"}).environment == "docker:img"
    with pytest.raises(ValueError, match="bad value for environment .*unknown environment 'nope'"):
        load_config(env={"TALARIA_HOME": str(tmp_path), "TALARIA_ENVIRONMENT": "nope"})


def test_run_with_a_bad_environment_is_one_line(tmp_path: Path, image: str) -> None:
    for env, expected in (("nope", "unknown environment 'nope'"),
                          ("docker:localhost/missing:1", "image 'localhost/missing:1' not found")):
        done = talaria("run", "hi", "--env", env, home=tmp_path, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert expected in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not containers(tmp_path)


def test_batch_tasks_each_get_a_container_and_leave_none(tmp_path: Path, image: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    with RoutedLLM() as llm:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", llm.openai_base_url)
        monkeypatch.setenv("TALARIA_HOME", str(tmp_path / "home"))
        tasks = tmp_path / "tasks.jsonl"
        tasks.write_text("".join(json.dumps(t) + "\n" for t in [
            {"id": f"t{i}", "prompt": f"write out.txt task-{i}", "environment": f"docker:{image}"}
            for i in range(3)] + [{"id": "bad", "prompt": "write x y", "environment": "docker:localhost/missing:1"}]))
        result = run_batch(BatchOptions(tasks_file=tasks, run_name="envs", output_dir=tmp_path / "data",
                                        workers=2, model="openai:fake", keep_workspaces=True),
                           progress_out=None)
    records = {json.loads(line)["prompt_index"]: json.loads(line)
               for line in (result.run_dir / "trajectories.jsonl").read_text().splitlines()}
    assert result.completed == 3 and result.failed == 1
    assert "image 'localhost/missing:1' not found" in json.dumps(records[3])
    for i in range(3):
        workspace = result.run_dir / "tasks" / task_dir_name(f"t{i}") / "workspace"
        assert (workspace / "out.txt").read_text() == f"task-{i}"
    assert not containers(tmp_path)


def test_acp_environment_option_and_a_command_in_the_container(tmp_path: Path, fake_llm, image: str) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        err = ed.error("session/set_config_option", {"sessionId": sid, "configId": "environment",
                                                     "value": "nope"})
        assert err.code == -32602 and "unknown environment" in str(err.data or err.message)
        err = ed.error("session/set_config_option", {"sessionId": sid, "configId": "environment",
                                                     "value": "docker:localhost/missing:1"})
        assert err.code == -32602 and "stays on local" in str(err.data or err.message)
        result = ed.request("session/set_config_option", {
            "sessionId": sid, "configId": "environment", "value": f"docker:{image}"}, timeout=120)
        options = {o["id"]: o for o in result["configOptions"]}
        assert options["environment"]["currentValue"] == f"docker:{image}"
        fake_llm.script([{"tool_calls": [llm_call("terminal", command="cat /proc/1/cmdline")]},
                         {"tool_calls": [llm_call("write_file", path="note.txt", content="hi")]},
                         {"text": "done"}])
        assert ed.prompt(sid, "where am I")["stopReason"] == "end_turn"
        cards = json.dumps(ed.updates(sid, "tool_call_update"))
        assert "while :; do sleep" in cards  # the container's idle loop: it ran in there
        titles = [u["title"] for u in ed.updates(sid, "tool_call")]
        assert "[on container talaria-" in titles[0]  # the command's card says where it ran
        assert "[on" not in titles[1]  # the files are the editor's (mounted): no note
        writes = [m for _, m in ed.transcript() if m.get("method") == "fs/write_text_file"]
        assert writes and writes[0]["params"]["path"].endswith("note.txt")  # through the editor
        mine = f"talaria-{sid[:16]}"  # other tests' containers may still be going away
        assert mine in containers()
        ed.request("session/close", {"sessionId": sid}, timeout=60)
        assert mine not in containers()


def test_env_check_lines(tmp_path: Path, image: str, sshd: Sshd) -> None:
    table = sshd.table(workdir=tmp_path / "remote")
    lines = ['[environments.box]', 'backend = "ssh"'] + [
        f"{k} = {json.dumps(v)}" for k, v in table.items()]
    (tmp_path / "config.toml").write_text("\n".join(lines) + "\n")
    done = talaria("env", "check", home=tmp_path, cwd=tmp_path)
    out = done.stdout.splitlines()
    assert out[0] == "ok  local: this machine"
    assert any(line.startswith("ok  box: 127.0.0.1 reachable, python 3.") for line in out), out
    assert any(line.startswith("no  modal: ") and "pip install 'talaria-agent[modal]'" in line for line in out)
    one = talaria("env", "check", f"docker:{image}", home=tmp_path, cwd=tmp_path)
    assert one.returncode == 0 and one.stdout.startswith(f"ok  docker:{image}: podman version")
    bad = talaria("env", "check", "nope", home=tmp_path, cwd=tmp_path)
    assert bad.returncode == 1 and "unknown environment" in bad.stdout


@pytest.mark.asyncio
async def test_lsp_sessions_run_their_commands_in_the_configured_environment(
        tmp_path: Path, fake_llm, image: str) -> None:
    from tests.lsp.lsp_editor import lsp_editor

    fake_llm.script([{"tool_calls": [llm_call("terminal", command="cat /proc/1/cmdline")]},
                     {"text": "In a container."}])
    async with lsp_editor(tmp_path, fake_llm, env={"TALARIA_ENVIRONMENT": f"docker:{image}"}) as ed:
        result = await ed.command("talaria.ask", "where am I")
        mine = f"talaria-{result['sessionId'][:16]}"
        assert mine in containers()  # the session's own container, up while it is open
        cards = json.dumps(ed.updates_of("tool_call_update"))
        titles = [u["title"] for u in ed.updates_of("tool_call")]
    assert result["stopReason"] == "end_turn"
    assert "while :; do sleep" in cards  # the container's idle loop: the command ran in there
    assert "[on container talaria-" in titles[0]
    assert mine not in containers()  # shut down with the server

