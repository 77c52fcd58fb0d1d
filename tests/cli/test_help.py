"""Every command says what it does, and a missing subcommand lists the choices (issue 28):
not argparse's "required: env_command", a name from our code."""

from __future__ import annotations

from pathlib import Path

import pytest

from talaria.acp_server.cli.main import build_parser
from talaria.acp_server.cli.parser import subparsers
from tests.acp.test_client import agent_env
from tests.cli.test_cli_run import talaria


@pytest.mark.parametrize(("args", "names"), [
    ([], ["run (run one task in the terminal)", "batch", "config"]),
    (["env"], ["check (one line per environment"]),
    (["trajectories"], ["export (", "view (", "compress ("]),
    (["checkpoints"], ["list (the project's checkpoints", "restore ("]),
    (["skills"], ["list, view, pin, unpin, archive, restore, history, curate"]),
])
def test_a_missing_subcommand_lists_the_choices(tmp_path: Path, args: list[str], names: list[str]) -> None:
    done = talaria(args, agent_env(tmp_path / "home"), tmp_path)
    assert done.returncode == 2
    line = done.stderr.splitlines()[-1]
    assert "choose one of: " in line, done.stderr
    for name in names:
        assert name in line, line
    assert "_command" not in done.stderr and "required: action" not in done.stderr


def test_every_command_has_a_description() -> None:
    found = subparsers(build_parser())
    assert {"acp", "lsp", "config", "demo", "env check", "checkpoints list", "trajectories view"} <= {
        words for words, _, _ in found}
    missing = [words for words, parser, _ in found if not (parser.description or "").strip()]
    assert not missing, missing


@pytest.mark.parametrize("command", ["acp", "config", "demo", "lsp"])
def test_help_of_a_command_says_what_it_does(tmp_path: Path, command: str) -> None:
    done = talaria([command, "--help"], agent_env(tmp_path / "home"), tmp_path)
    assert done.returncode == 0
    description = done.stdout.split("\n\n")[1]
    assert not description.startswith(("options:", "positional")), done.stdout
