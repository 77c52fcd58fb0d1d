"""Every file Talaria reads keys from names an unknown key and the closest known one (issue 28):
batch task lines (exit 2, nothing run), config.toml and its tables (a warning wherever it is
read; `talaria config check` lists every problem and exits 2), environment tables, SKILL.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from talaria.tools.environments.spec import resolve
from talaria.tools.errors import EnvError
from talaria.tools.skills.format import SkillFormatError, parse
from tests.acp.test_client import agent_env
from tests.cli.test_cli_run import talaria


@pytest.mark.parametrize(("line", "said"), [
    ('{"prompt": "go", "worskpace": "tpl"}', "unknown key 'worskpace' (did you mean 'workspace'?)"),
    ('{"promt": "go"}', "unknown key 'promt' (did you mean 'prompt'?)"),
    ('{"prompt": "go", "bogus": 1}', "unknown key 'bogus' (known keys: check, cwd, environment, "),
    ('{"prompt": "go", "enviroment": "docker"}', "unknown key 'enviroment' (did you mean 'environment'?)"),
], ids=["typo", "prompt", "unknown", "environment"])
def test_a_task_line_with_an_unknown_key_is_refused(tmp_path: Path, line: str, said: str) -> None:
    (tmp_path / "tpl").mkdir()
    (tmp_path / "tasks.jsonl").write_text('{"prompt": "fine"}\n' + line + "\n")
    done = talaria(["batch", "tasks.jsonl", "--run-name", "r"], agent_env(tmp_path / "home"), tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"tasks.jsonl:2: {said}" in done.stderr
    assert "a task's keys are prompt, id, workspace, cwd, model, toolsets, environment" in done.stderr
    assert not (tmp_path / "data").exists()  # nothing ran, no run directory


CONFIG = """\
max_turn = 5
model = "opnai:gpt-4.1"
[providers.work]
base_ur = "http://127.0.0.1:9/v1"
[mcp_servers.files]
comand = "mcp-server-filesystem"
[environments.box]
backend = "docker"
imgae = "python:3.12"
"""

PROBLEMS = [
    "config.toml: unknown key 'max_turn' (did you mean 'max_turns'?)",
    "config.toml: [providers.work] unknown key 'base_ur' (did you mean 'base_url'?)",
    "config.toml: [mcp_servers.files] unknown key 'comand' (did you mean 'command'?)",
    "[environments.box] unknown key 'imgae' (did you mean 'image'?)",
    "model 'opnai:gpt-4.1': unknown provider 'opnai' (did you mean 'openai'?)",
]


def test_config_check_lists_every_problem_and_exits_2(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(CONFIG)
    done = talaria(["config", "check"], agent_env(home), tmp_path)
    assert done.returncode == 2, done.stderr
    for problem in PROBLEMS:
        assert problem in done.stderr, done.stderr
    assert done.stderr.count("max_turn'") == 1  # not again as a warning
    assert "5 problem(s)" in done.stderr and "Traceback" not in done.stderr

    (home / "config.toml").write_text('max_turns = 5\n[providers.work]\nbase_url = "http://x/v1"\n'
                                      '[prices."openai:gpt-4o"]\ninput = 2.5\noutput = 10.0\n')
    done = talaria(["config", "check"], agent_env(home), tmp_path)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.endswith("config.toml: ok\n")


@pytest.mark.parametrize("args", [["config"], ["run", "hello"], ["skills", "list"], ["env", "check"],
                                  ["checkpoints", "list"]],
                         ids=["config", "run", "skills", "env", "checkpoints"])
def test_an_unknown_config_key_is_a_warning_wherever_config_is_read(tmp_path: Path, args: list[str]) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("max_turn = 5\n")
    env = {k: v for k, v in agent_env(home).items() if k != "TALARIA_MODEL"}
    done = talaria(args, env, tmp_path)
    line = ("talaria: warning: " + str(home / "config.toml") + ": unknown key 'max_turn' (did "
            "you mean 'max_turns'?); `talaria config check` lists every problem")
    assert done.stderr.count(line) == 1, done.stderr
    assert line not in done.stdout


def test_environment_tables_and_names_say_the_closest_one() -> None:
    with pytest.raises(EnvError, match=r"\[environments.box\] unknown key 'imgae' \(did you mean 'image'\?\)"):
        resolve("box", {"box": {"backend": "docker", "imgae": "x"}})
    with pytest.raises(EnvError, match=r"unknown environment 'dokcer' \(did you mean 'docker'\?\)"):
        resolve("dokcer", {})


@pytest.mark.parametrize(("key", "meant"), [("allowed_tools", "allowed-tools"), ("licence", "license"),
                                            ("descripton", "description")])
def test_a_misspelt_skill_key_is_refused_with_the_one_meant(key: str, meant: str) -> None:
    text = f"---\nname: fix-it\ndescription: Fixes it.\n{key}: x\n---\nbody\n"
    with pytest.raises(SkillFormatError, match=f"unknown key '{key}' \\(did you mean '{meant}'\\?\\)"):
        parse(text, "fix-it")
    meta, _ = parse("---\nname: fix-it\ndescription: Fixes it.\nversion: 2\n---\nbody\n", "fix-it")
    assert meta["version"] == 2  # another tool's key is kept
