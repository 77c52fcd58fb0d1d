"""Permission mode names: Talaria's, and Claude Code's spellings of the same modes. Imports
nothing, so configuration can check a mode without loading the permission policy."""

from __future__ import annotations

MODES = ("default", "accept_edits", "plan", "auto", "dont_ask")
"""The modes an editor may choose."""
ALL_MODES = (*MODES, "bypass")
"""`bypass` only from the command line or the environment, for headless runs."""
ALIASES = {"acceptEdits": "accept_edits", "dontAsk": "dont_ask", "bypassPermissions": "bypass"}


def editor_mode(mode: str) -> str:
    """The mode an editor's session runs in: `mode` when an editor may choose it, else
    `default` (`bypass` is for headless runs: editors ask)."""
    return mode if mode in MODES else "default"


def normalize_mode(value: object) -> str:
    """The canonical name of a mode or alias; ValueError naming the valid ones otherwise."""
    if isinstance(value, str) and (name := ALIASES.get(value.strip(), value.strip())) in ALL_MODES:
        return name
    raise ValueError(f"unknown permission mode {value!r}; use one of {', '.join(ALL_MODES)} "
                     f"(or Claude Code's {', '.join(ALIASES)})")
