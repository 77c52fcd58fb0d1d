"""The editor launch configurations in `editors/` parse and start `talaria acp`.

JSON files are parsed for real. Lua and Emacs Lisp get a light structural check (strings and
comments skipped, brackets balanced) plus a real parse when `luac` / `emacs` are installed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests import ROOT

EDITORS = ROOT / "editors"
COMMAND, ARGS = "talaria", ["acp"]

JSON_CONFIGS = {
    "zed/settings.json": ("agent_servers", "Talaria"),
    "jetbrains/acp.json": ("agent_servers", "Talaria"),
    "vscode/settings.json": ("acp.agents", "Talaria"),
}
LUA_CONFIGS = ["neovim/codecompanion.lua", "neovim/avante.lua"]
ELISP_CONFIGS = ["emacs/agent-shell-talaria.el"]
ALL_CONFIGS = [*JSON_CONFIGS, *LUA_CONFIGS, *ELISP_CONFIGS]


@pytest.mark.parametrize("name", JSON_CONFIGS)
def test_json_configs_launch_talaria_acp(name: str) -> None:
    config: Any = json.loads((EDITORS / name).read_text(encoding="utf-8"))
    table, agent = JSON_CONFIGS[name]
    entry = config[table][agent]
    assert entry["command"] == COMMAND and entry["args"] == ARGS
    assert isinstance(entry.get("env", {}), dict)
    if name.startswith("zed/"):
        assert entry["type"] == "custom"


def test_codecompanion_adapter_extends_a_builtin_acp_adapter() -> None:
    text = code_of(EDITORS / "neovim/codecompanion.lua", line_comment="--")
    assert_balanced(text)
    assert re.search(r"acp\s*=\s*\{\s*talaria\s*=\s*function", text)
    assert re.search(r'adapters"\)\.extend\(\s*"goose"', text)
    assert re.search(r'default\s*=\s*\{\s*"talaria"\s*,\s*"acp"\s*\}', text)
    assert re.search(r'adapter\s*=\s*"talaria"', text)


def test_avante_provider_launches_talaria_acp() -> None:
    text = code_of(EDITORS / "neovim/avante.lua", line_comment="--")
    assert_balanced(text)
    assert re.search(r'acp_providers\s*=\s*\{\s*\[\s*"talaria"\s*\]\s*=\s*\{', text)
    assert re.search(r'command\s*=\s*"talaria"', text)
    assert re.search(r'args\s*=\s*\{\s*"acp"\s*\}', text)
    assert re.search(r'provider\s*=\s*"talaria"', text)


def test_agent_shell_config_launches_talaria_acp() -> None:
    path = EDITORS / "emacs/agent-shell-talaria.el"
    text = code_of(path, line_comment=";")
    assert_balanced(text)
    assert re.search(r"'\(\s*\"talaria\"\s+\"acp\"\s*\)", text)
    for call in ("agent-shell-make-agent-config", "acp-make-client", "agent-shell-start"):
        assert f"({call}" in text
    assert f"(provide '{path.stem})" in text


@pytest.mark.skipif(not shutil.which("luac"), reason="luac not installed")
@pytest.mark.parametrize("name", LUA_CONFIGS)
def test_lua_configs_compile(name: str) -> None:
    subprocess.run(["luac", "-p", str(EDITORS / name)], check=True)


@pytest.mark.skipif(not shutil.which("emacs"), reason="emacs not installed")
@pytest.mark.parametrize("name", ELISP_CONFIGS)
def test_elisp_configs_read(name: str) -> None:
    form = f'(with-temp-buffer (insert-file-contents "{EDITORS / name}") (emacs-lisp-mode) (check-parens))'
    subprocess.run(["emacs", "--batch", "--eval", form], check=True)


def test_every_config_is_listed_and_every_folder_explains_itself() -> None:
    index = (EDITORS / "README.md").read_text(encoding="utf-8")
    for name in ALL_CONFIGS:
        assert f"]({name})" in index, f"editors/README.md does not link {name}"
        assert (EDITORS / name).parent.joinpath("README.md").is_file()
    shipped = {p.relative_to(EDITORS).as_posix() for p in EDITORS.rglob("*") if p.is_file()
               and not _in_extension(p) and "__pycache__" not in p.parts}
    from tests.lsp.test_lsp_editors import LSP_CONFIGS  # `talaria lsp`'s, checked there

    registry = {"registry/agent.json", "registry/icon.svg"}  # tests/test_registry.py
    harbor = {"harbor/talaria_harbor.py", "harbor/wheels.py", "harbor/requirements.txt"}  # tests/test_harbor.py
    assert shipped - {p for p in shipped if p.endswith("README.md")} == {
        *ALL_CONFIGS, *LSP_CONFIGS, *registry, *harbor}


EXTENSION = EDITORS / "vscode"
"""Also the source of Talaria's own VS Code extension (a TypeScript project, built by its
ci.sh): its files are not launch configurations."""


def _in_extension(path: Path) -> bool:
    kept = path.parent == EXTENSION and path.name in ("settings.json", "README.md")
    return path.is_relative_to(EXTENSION) and not kept


def code_of(path: Path, *, line_comment: str) -> str:
    """The file with comments removed and string contents kept (they hold the command)."""
    out, text, i = [], path.read_text(encoding="utf-8"), 0
    while i < len(text):
        char = text[i]
        if char == '"' or (char == "'" and line_comment == "--"):
            end = i + 1
            while text[end] != char:
                end += 2 if text[end] == "\\" else 1
            out.append(text[i : end + 1])
            i = end + 1
        elif text.startswith(line_comment, i):
            newline = text.find("\n", i)
            i = newline if newline >= 0 else len(text)
        else:
            out.append(char)
            i += 1
    return "".join(out)


def assert_balanced(code: str) -> None:
    pairs, stack = {")": "(", "]": "[", "}": "{"}, []
    in_string = False
    for i, char in enumerate(code):
        if char == '"' and (i == 0 or code[i - 1] != "\\"):
            in_string = not in_string
        elif in_string:
            continue
        elif char in "([{":
            stack.append(char)
        elif char in pairs:
            assert stack and stack.pop() == pairs[char], f"unbalanced {char!r} at offset {i}"
    assert not stack, f"unclosed {stack}"
    assert not in_string, "unterminated string"
