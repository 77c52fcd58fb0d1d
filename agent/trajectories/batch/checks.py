"""The verification keys of a task, checked: `check`, `tags`, and seconds.

    check_of("pytest -q", where)                           -> {"command", "timeout", "env"}
    check_of({"command": "bash t.sh", "timeout": 60}, where)

A check is a shell command (a string), or an object with `command` and optionally `timeout`
(seconds, default DEFAULT_CHECK_TIMEOUT_S, Harbor's default) and `env` (variables it gets).
Anything else is a ValueError of one line: where, what is wrong, what to write instead.
"""

from __future__ import annotations

import difflib
from typing import Any

DEFAULT_CHECK_TIMEOUT_S = 600.0
MAX_SECONDS = 7 * 24 * 3600.0
"""Longer than this is a typo (milliseconds given as seconds)."""
MAX_TAGS = 64
CHECK_KEYS = ("command", "timeout", "env")
EXAMPLE = '{"command": "python -m pytest -q", "timeout": 300}'


def closest(word: str, known: list[str] | tuple[str, ...]) -> str:
    """` (did you mean 'x'?)` when `word` looks like a misspelt known key, else ``."""
    match = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


def seconds_of(value: Any, where: str, key: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_SECONDS:
        raise ValueError(f"{where}: \"{key}\" must be seconds (a number above 0, at most "
                         f"{MAX_SECONDS:g}), not {value!r}")
    return float(value)


def check_of(value: Any, where: str) -> dict[str, Any] | None:
    """The task's check as {"command", "timeout", "env"}, or None when it has none."""
    if value is None:
        return None
    if isinstance(value, str):
        value = {"command": value}
    if isinstance(value, list):
        raise ValueError(f"{where}: \"check\" is a shell command string, not a list; "
                         f"write it as one string or as {EXAMPLE}")
    if not isinstance(value, dict):
        raise ValueError(f"{where}: \"check\" must be a shell command, e.g. {EXAMPLE}")
    for key in value:
        if key not in CHECK_KEYS:
            raise ValueError(f"{where}: unknown key {key!r} in \"check\"{closest(key, CHECK_KEYS)}; "
                             f"known: {', '.join(CHECK_KEYS)}")
    command = value.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ValueError(f"{where}: \"check\" needs \"command\", a non-empty shell command, "
                         f"e.g. {EXAMPLE}")
    env = value.get("env") or {}
    if not isinstance(env, dict) or not all(
            isinstance(k, str) and k.isidentifier() and isinstance(v, str | int | float)
            for k, v in env.items()):
        raise ValueError(f"{where}: \"check\" env must map variable names to strings")
    timeout = seconds_of(value.get("timeout"), where, "check.timeout")
    return {"command": command, "timeout": timeout or DEFAULT_CHECK_TIMEOUT_S,
            "env": {k: str(v) for k, v in env.items()}}


def tags_of(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(t, str) and t.strip() for t in value):
        raise ValueError(f"{where}: \"tags\" must be a list of names, e.g. [\"python\", \"easy\"]")
    if len(value) > MAX_TAGS:
        raise ValueError(f"{where}: more than {MAX_TAGS} tags")
    return tuple(dict.fromkeys(t.strip() for t in value))
