"""The system prompt: short, because it is paid for on every model call."""

from __future__ import annotations

import os
import re
from pathlib import Path

SYSTEM_PROMPT = """\
You are Talaria, a coding agent working in the user's project through their editor.
Project root: {cwd}.{more} OS: {os}.

- Use tools to inspect before you change anything; read a file before patching it.
- Prefer `patch` for edits and `write_file` for new files; keep the file's style.
- Check your work with the project's tests or commands when it makes sense.
- For multi-step work, keep a `todo` list current.
- Be brief: report what you changed and what remains. Do not paste whole files back.
"""

INSTRUCTION_FILES = ("AGENTS.md",)
INSTRUCTIONS_LIMIT = 8_000


def system_prompt(cwd: Path, additional_dirs: tuple[Path, ...] = ()) -> str:
    """The base prompt, plus the project's AGENTS.md when it has one (capped)."""
    more = (f" Also part of the project (absolute paths reach them): "
            f"{', '.join(map(str, additional_dirs))}." if additional_dirs else "")
    text = SYSTEM_PROMPT.format(cwd=cwd, more=more, os=os.uname().sysname)
    for name in INSTRUCTION_FILES:
        path = cwd / name
        try:
            extra = path.read_text(encoding="utf-8")[:INSTRUCTIONS_LIMIT]
        except (OSError, UnicodeDecodeError):
            continue
        text += f"\n# Project instructions ({name})\n{extra}\n"
    return text


def roots_note(additional_dirs: tuple[Path, ...]) -> str:
    """What the model is told when a session comes back with other additional directories."""
    if not additional_dirs:
        return "[The project has no additional directories any more: only the project root.]"
    return ("[The project's additional directories are now (absolute paths reach them): "
            f"{', '.join(map(str, additional_dirs))}.]")


_WORD = re.compile(r"\S+")


def flattened(text: str, limit: int) -> str:
    """The first `limit` characters of `text` with every run of whitespace made one space.

    Word by word, only as far as needed: `" ".join(text.split())` of a 1 MB prompt makes
    ~150,000 strings, 11 ms on the event loop for a label of 200 characters (issue 9)."""
    words: list[str] = []
    size = 0
    for match in _WORD.finditer(text):
        words.append(match.group())
        size += len(words[-1]) + 1
        if size > limit:
            break
    return " ".join(words)[:limit]
