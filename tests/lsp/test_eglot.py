"""A real Eglot (Emacs 29+: scripts/test installs Emacs 30 from Debian's bookworm-backports)
driving `talaria lsp` through the shipped `talaria-eglot.el`: Eglot advertises no
`window.showMessage`, yet every edit is asked about with `window/showMessageRequest` (answered
at Eglot's own prompt, read from stdin in batch mode), and the answer decides it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import ROOT
from tests.acp_harness import server_env
from tests.fakellm import FakeLLM

SCRIPT = """
(require 'eglot)
(load "{el}")
(setq eglot-server-programs
      `((python-mode . ("{python}" "-m" "talaria.acp_server.cli.main" "lsp"
                        :initializationOptions (:mode "default")))))
(setq eglot-confirm-server-edits nil)
(find-file "{file}")
(python-mode)
(apply #'eglot (eglot--guess-contact))
(with-timeout (60 (message "RESULT: no server") (kill-emacs 3))
  (while (not (eglot-current-server)) (accept-process-output nil 0.1)))
(message "RESULT: %S" (talaria-eglot-ask "Set x to 2"))
(message "BUFFER: %S" (buffer-string))
(kill-emacs 0)
"""


def emacs_version() -> int:
    found = shutil.which("emacs")
    if found is None:
        return 0
    out = subprocess.run([found, "--version"], capture_output=True, text=True).stdout
    match = re.match(r"GNU Emacs (\d+)", out)
    return int(match.group(1)) if match else 0


def eglot_session(tmp_path: Path, llm: FakeLLM, answer: str) -> str:
    version = emacs_version()
    if version < 29:  # scripts/test installs Emacs 30; by hand, Debian's 28 has no Eglot
        pytest.fail(f"Emacs 29+ is needed for Eglot (found {version or 'none'}): run scripts/test")
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)  # project.el's root
    (project / "a.py").write_text("x = 1\n")
    script = tmp_path / "eglot-test.el"
    script.write_text(SCRIPT.format(el=ROOT / "editors/emacs/talaria-eglot.el",
                                    python=sys.executable, file=project / "a.py"))
    llm.script([{"tool_calls": [{"name": "patch", "arguments": {
        "path": "a.py", "old_string": "x = 1", "new_string": "x = 2"}}]}, {"text": "Changed x."}])
    done = subprocess.run(["emacs", "--batch", "-Q", "-l", str(script)], input=f"{answer}\n",
                          capture_output=True, text=True, timeout=180, cwd=project,
                          env=server_env(tmp_path / "home", llm))
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_eglot_is_asked_and_an_allowed_edit_lands_in_the_buffer(tmp_path: Path, fake_llm: FakeLLM) -> None:
    out = eglot_session(tmp_path, fake_llm, "Allow once")
    assert "Talaria wants to edit: Edit a.py" in out  # Eglot showed the question
    assert ':stopReason "end_turn"' in out and ':edited ["a.py"]' in out
    assert 'BUFFER: "x = 2\n"' in out


def test_eglot_rejecting_keeps_the_buffer(tmp_path: Path, fake_llm: FakeLLM) -> None:
    out = eglot_session(tmp_path, fake_llm, "Reject")
    assert "Talaria wants to edit: Edit a.py" in out
    assert 'BUFFER: "x = 1\n"' in out and ':edited []' in out
    refusal = str(fake_llm.requests[1]["json"]["messages"][-1])
    assert "rejected" in refusal  # the user's no, not "could not ask"
