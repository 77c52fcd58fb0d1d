"""The system prompt: short, because it is paid for on every model call."""

from __future__ import annotations

import platform
from pathlib import Path

SYSTEM_PROMPT = """\
You are Talaria, a coding agent working in the user's project through their editor.
Project root: {cwd}. OS: {os}.

- Use tools to inspect before you change anything; read a file before patching it.
- Prefer `patch` for edits and `write_file` for new files; keep the file's style.
- Run the project's tests or commands to check your work when it makes sense.
- For multi-step work, keep a `todo` list current.
- Be brief: report what you changed and what remains. Do not paste whole files back.
"""

INSTRUCTION_FILES = ("AGENTS.md",)
INSTRUCTIONS_LIMIT = 8_000


def system_prompt(cwd: Path) -> str:
    """The base prompt, plus the project's AGENTS.md when it has one (capped)."""
    text = SYSTEM_PROMPT.format(cwd=cwd, os=platform.system())
    for name in INSTRUCTION_FILES:
        path = cwd / name
        try:
            extra = path.read_text(encoding="utf-8")[:INSTRUCTIONS_LIMIT]
        except (OSError, UnicodeDecodeError):
            continue
        text += f"\n# Project instructions ({name})\n{extra}\n"
    return text
