"""Where and with what scripts run: modes, interpreter, environment scrubbing, stubs, config."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from talaria.agent.config import load_config
from talaria.tools.execute_code.env import interpreter, scrub_env
from talaria.tools.execute_code.stubs import module_source, signature
from talaria.tools.execute_code.tool import EXEC_TOOLS
from talaria.tools.registry import REGISTRY, ToolSpec
from tests.exec_helpers import configure, execute, output_json
from tests.helpers import make_session

SHOW = "import json, os, sys\nprint(json.dumps([os.getcwd(), sys.executable, sys.path[0], dict(os.environ)]))"


def test_scrub_env_drops_secrets_keeps_essentials_and_passthrough() -> None:
    env = {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C", "FAKE_API_KEY": "k", "GITHUB_TOKEN": "t",
           "DB_PASSWORD": "p", "XDG_SESSION_ID": "s", "SSH_AUTH_SOCK": "/a", "RANDOM_TOOL_HOME": "r",
           "MY_SETTING": "m", "JAVA_HOME": "/j"}
    assert scrub_env(env) == {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C"}
    assert scrub_env(env, ("JAVA_*", "GITHUB_TOKEN")) == {
        "PATH": "/bin", "HOME": "/h", "LC_ALL": "C", "JAVA_HOME": "/j", "GITHUB_TOKEN": "t"}


def test_scripts_do_not_see_secrets_unless_passed_through(fake_llm, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_API_KEY", "sk-should-not-leak")
    session = make_session(fake_llm, tmp_path)
    seen = output_json(execute(session, SHOW))[3]
    assert "FAKE_API_KEY" not in seen and "OPENAI_API_KEY" not in seen
    assert seen["PATH"] and Path(seen["TMPDIR"]).parent == tmp_path / ".home" / "cache" / "exec"
    configure(session, env_passthrough=("FAKE_API_KEY",))
    allowed = execute(session, SHOW)
    assert output_json(allowed)[3]["FAKE_API_KEY"] == "sk-should-not-leak"
    assert allowed["kernel"] == ("new: the previous one ended because its settings changed "
                                 "(mode, directory, interpreter or environment)")


def test_project_mode_runs_in_the_project(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    (session.cwd / "helper_mod.py").write_text("VALUE = 42\n")
    cwd, python, first_path, _ = output_json(execute(session, SHOW))
    assert cwd == str(session.cwd) and first_path == str(session.cwd)
    assert os.path.samefile(python, sys.executable)  # a venv's python and python3 are one
    assert execute(session, "import helper_mod; print(helper_mod.VALUE)")["output"] == "42\n"
    assert execute(session, "open('made.txt', 'w').write('ok')")["status"] == "success"
    assert (session.cwd / "made.txt").read_text() == "ok"


def test_strict_mode_runs_in_a_fresh_staging_dir_with_our_python(fake_llm, tmp_path: Path,
                                                                  monkeypatch) -> None:
    monkeypatch.setenv("VIRTUAL_ENV", str(fake_venv(tmp_path / "venv", "3.11")))
    session = make_session(fake_llm, tmp_path, exec_mode="strict")
    result = execute(session, SHOW)
    cwd, python, _, _ = output_json(result)
    assert Path(cwd).parent == tmp_path / ".home" / "cache" / "exec" and cwd != str(session.cwd)
    assert python == sys.executable
    assert execute(session, "open('scratch.txt', 'w').write('ok')")["status"] == "success"
    outside = execute(session, f"open({str(session.cwd / 'x.txt')!r}, 'w')")
    assert result["sandbox"] != "rlimits", "the test machine offers a confining tier (.ci installs bwrap)"
    assert outside["status"] == "error" and not (session.cwd / "x.txt").exists()


def fake_venv(root: Path, version: str) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").symlink_to(sys.executable)
    home = Path(sys.executable).parent
    (root / "pyvenv.cfg").write_text(f"home = {home}\nversion = {version}.0\n")
    return root


def test_project_interpreter_from_virtual_env(fake_llm, tmp_path: Path, monkeypatch) -> None:
    venv = fake_venv(tmp_path / "venv", "3.11")
    assert interpreter("project", {"VIRTUAL_ENV": str(venv)}) == (str(venv / "bin" / "python"), [])
    old = fake_venv(tmp_path / "old", "3.7")
    python, warnings = interpreter("project", {"CONDA_PREFIX": str(old)})
    assert python == sys.executable and "3.7 (< 3.8)" in warnings[0]
    python, warnings = interpreter("project", {"VIRTUAL_ENV": str(tmp_path / "missing")})
    assert python == sys.executable and "no usable python" in warnings[0]
    assert interpreter("strict", {"VIRTUAL_ENV": str(venv)}) == (sys.executable, [])
    session = make_session(fake_llm, tmp_path)
    # Inside the project: bubblewrap's private /tmp would hide a venv elsewhere under /tmp.
    local = fake_venv(session.cwd / ".venv", "3.12")
    monkeypatch.setenv("VIRTUAL_ENV", str(local))
    assert output_json(execute(session, SHOW))[1] == str(local / "bin" / "python")


def test_stubs_and_description_come_from_the_tool_specs() -> None:
    specs = REGISTRY.select(list(EXEC_TOOLS))
    description = REGISTRY.get("execute_code").text()
    # Named in the description (their schemas are the model's own tools), defined in the stubs.
    assert f"from hermes_tools import {', '.join(s.name for s in specs)}`" in description
    assert "50 tool calls" in description and "300 s" in description
    calls = []
    namespace = {"_call": lambda tool, args: calls.append((tool, args)) or {"ok": True}}
    source = module_source(specs)
    assert all(f"def {signature(spec)}:" in source for spec in specs)
    exec(compile(source, "<hermes_tools>", "exec"), namespace)
    assert namespace["patch"]("a.py", "x", new_string="y") == {"ok": True}
    namespace["search_files"]("TODO", file_glob="*.py")
    assert calls == [("patch", {"path": "a.py", "old_string": "x", "new_string": "y"}),
                     ("search_files", {"pattern": "TODO", "target": "content", "path": ".",
                                       "file_glob": "*.py", "limit": 50})]
    assert namespace["__all__"][3:] == list(EXEC_TOOLS)

    async def noop(args, ctx):
        return {}

    bad = ToolSpec("bad", "d", {"type": "object", "properties": {"class": {"type": "string"}}}, noop)
    with pytest.raises(ValueError, match="cannot be a Python argument"):
        module_source([bad])


def test_config_fields_and_session_settings(fake_llm, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('exec_mode = "strict"\nexec_timeout = 20\n')
    env = {"TALARIA_HOME": str(home), "TALARIA_EXEC_ENV_PASSTHROUGH": "JAVA_HOME, GO*"}
    config = load_config(env=env)
    assert (config.exec_mode, config.exec_timeout, config.exec_env_passthrough) == (
        "strict", 20.0, ("JAVA_HOME", "GO*"))
    (home / "config.toml").write_text('exec_mode = "yolo"\n')
    with pytest.raises(ValueError, match="exec_mode"):
        load_config(env={"TALARIA_HOME": str(home)})
    session = make_session(fake_llm, tmp_path, exec_timeout=7, exec_mode="strict")
    settings = session.tool_state.exec_settings
    assert (settings.mode, settings.timeout) == ("strict", 7.0)
    assert settings.cache() == tmp_path / ".home" / "cache" / "exec"
    assert json.loads(json.dumps(session.tool_definitions()))  # still plain JSON


def test_site_packages_work_from_the_first_cell(fake_llm, tmp_path: Path) -> None:
    """The kernel starts with -S; `site` runs at the first third-party import or after the
    first cell, so neither the script nor package metadata can tell."""
    session = make_session(fake_llm, tmp_path)
    first = execute(session, "import anyio, sys\nprint(anyio.__name__)\nexit(0)")
    assert first["status"] == "success" and first["output"] == "anyio\n"
    later = execute(session, "import importlib.metadata as m, sys\n"
                             "print(m.version('anyio'), any('site-packages' in p for p in sys.path))")
    assert later["output"].split()[1] == "True"
    fresh = execute(session, "import json\nprint('ok')", reset=True)
    assert fresh["output"] == "ok\n"
    assert execute(session, "import sys\nprint(any('site-packages' in p for p in sys.path))")[
        "output"] == "True\n"
