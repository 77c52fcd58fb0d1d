"""`talaria trajectories export|view` as a real subprocess against a TALARIA_HOME store."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from talaria.agent.store import Store
from tests import ROOT, TESTS

FIXTURE = TESTS / "golden" / "transcript.jsonl"
SESSION = "5e55a1b2c3d4e5f6"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    store = Store(home / "sessions.db")
    store.create_session(SESSION, "/proj", model="openai:gpt-test", mode="default")
    for line in FIXTURE.read_text().splitlines():
        store.append(SESSION, json.loads(line))
    store.close()
    return home


def cli(*args: str, home: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TALARIA_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "talaria.acp_server.cli.trajectories", *args],
                          capture_output=True, text=True, env=env, cwd=cwd or ROOT, timeout=60)


def test_export_a_session_by_id_and_by_prefix(home: Path) -> None:
    done = cli("export", SESSION, "--format", "sharegpt", home=home)
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stdout)
    assert line["metadata"]["session_id"] == SESSION and line["completed"] is True
    assert "sk-proj-Zx81" not in done.stdout and "[REDACTED]" in done.stdout
    by_prefix = cli("export", SESSION[:6], "--format", "sharegpt", home=home)
    assert by_prefix.stdout == done.stdout


def test_export_files_to_an_output_file(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "run.atif.json"
    done = cli("export", str(FIXTURE), "--format", "atif", "-o", str(out), home=home)
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == "ATIF-v1.8" and doc["session_id"] == "transcript"
    two = cli("export", str(FIXTURE), SESSION, "--format", "openai", home=home)
    lines = two.stdout.splitlines()
    assert len(lines) == 2 and all("messages" in json.loads(line) for line in lines)


def test_unknown_session_is_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty-home"
    done = cli("export", "nope", home=empty)
    assert done.returncode == 2 and "no session store" in done.stderr and not done.stdout
    assert not (empty / "sessions.db").exists(), "looking must not create a store"


def test_view_a_session_and_a_batch_dir(home: Path, tmp_path: Path) -> None:
    page = tmp_path / "s.html"
    done = cli("view", SESSION, "-o", str(page), home=home)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(page) and "<details" in page.read_text()
    run_dir = tmp_path / "data" / "r1"
    run_dir.mkdir(parents=True)
    line = cli("export", SESSION, home=home).stdout
    (run_dir / "trajectories.jsonl").write_text(line * 3)
    done = cli("view", str(run_dir), home=home)
    assert done.returncode == 0, done.stderr
    assert "<svg" in (run_dir / "report.html").read_text()


def test_the_command_plugs_into_the_main_parser(home: Path, capsys, monkeypatch) -> None:
    from talaria.acp_server.cli.trajectories import add_parser, run

    monkeypatch.setenv("TALARIA_HOME", str(home))
    parser = argparse.ArgumentParser(prog="talaria")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["trajectories", "export", SESSION, "--format", "openai"])
    assert args.command == "trajectories" and run(args) == 0
    assert json.loads(capsys.readouterr().out)["messages"][0]["role"] == "system"


def test_importing_the_command_loads_nothing_of_the_agent() -> None:
    code = ("import sys, talaria.acp_server.cli.trajectories; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('agent', 'tools')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=30)
    assert done.stdout.strip() == "[]", done.stdout
