"""The `talaria lsp` launch configurations in `editors/` parse and start `talaria lsp`.

TOML and JSON are parsed for real; Lua is compiled by `luac` (and run by a real Neovim in
`test_neovim.py`); Emacs Lisp gets the structural check of the ACP configs plus `check-parens`
in a real Emacs when installed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib

import pytest

from tests.acp.test_editors import EDITORS, assert_balanced, code_of

LSP_CONFIGS = [
    "helix/languages.toml", "sublime/LSP.sublime-settings", "neovim/lsp.lua",
    "emacs/talaria-eglot.el", "emacs/talaria-lsp-mode.el",
]
COMMANDS = ("talaria.ask", "talaria.fix", "talaria.explain", "talaria.cancel", "talaria.newSession")


def test_helix_declares_the_server_and_uses_it_next_to_others() -> None:
    config = tomllib.loads((EDITORS / "helix/languages.toml").read_text(encoding="utf-8"))
    server = config["language-server"]["talaria"]
    assert server["command"] == "talaria" and server["args"] == ["lsp"]
    assert server["config"]["mode"] == "default"
    for language in config["language"]:
        assert "talaria" in language["language-servers"] and len(language["language-servers"]) > 1


def test_sublime_client_launches_talaria_lsp() -> None:
    text = (EDITORS / "sublime/LSP.sublime-settings").read_text(encoding="utf-8")
    client = json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))["clients"]["talaria"]
    assert client["command"] == ["talaria", "lsp"] and client["enabled"] is True
    assert client["selector"] and client["initializationOptions"] == {"mode": "default"}


def test_neovim_config_enables_the_server_and_its_commands() -> None:
    text = code_of(EDITORS / "neovim/lsp.lua", line_comment="--")
    assert_balanced(text)
    assert re.search(r'cmd\s*=\s*\{\s*"talaria"\s*,\s*"lsp"\s*\}', text)
    assert 'vim.lsp.enable("talaria")' in text
    for command in COMMANDS:
        assert f'"{command}"' in text, command


@pytest.mark.parametrize("name, launch", [
    ("emacs/talaria-eglot.el", r'\("talaria"\s+"lsp"'),
    ("emacs/talaria-lsp-mode.el", r"lsp-stdio-connection\s+'\(\s*\"talaria\"\s+\"lsp\"\s*\)"),
])
def test_emacs_configs_launch_talaria_lsp(name: str, launch: str) -> None:
    path = EDITORS / name
    text = code_of(path, line_comment=";")
    assert_balanced(text)
    assert re.search(launch, text)
    assert f"(provide '{path.stem})" in text
    assert '"talaria.ask"' in text and '"talaria.cancel"' in text


@pytest.mark.skipif(not shutil.which("luac"), reason="luac not installed")
def test_neovim_config_compiles() -> None:
    subprocess.run(["luac", "-p", str(EDITORS / "neovim/lsp.lua")], check=True)


@pytest.mark.skipif(not shutil.which("emacs"), reason="emacs not installed")
@pytest.mark.parametrize("name", ["emacs/talaria-eglot.el", "emacs/talaria-lsp-mode.el"])
def test_elisp_configs_read(name: str) -> None:
    form = f'(with-temp-buffer (insert-file-contents "{EDITORS / name}") (emacs-lisp-mode) (check-parens))'
    subprocess.run(["emacs", "--batch", "--eval", form], check=True)


def test_every_lsp_config_is_listed_with_a_readme() -> None:
    index = (EDITORS / "README.md").read_text(encoding="utf-8")
    for name in LSP_CONFIGS:
        assert f"]({name})" in index, f"editors/README.md does not link {name}"
        readme = (EDITORS / name).parent / "README.md"
        assert readme.is_file() and (EDITORS / name).name in readme.read_text(encoding="utf-8")
