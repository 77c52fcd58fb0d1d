"""Keys in what users write (batch task lines, config.toml and its tables, SKILL.md): an
unknown one is named with the closest known key, so a typo (`"worskpace"`, `max_turn = 5`)
is never silently ignored (issue 28). Imports nothing of ours."""

from __future__ import annotations

from collections.abc import Iterable

CUTOFF = 0.6
"""difflib's similarity below which no key is offered as the one meant."""


def closest(key: str, known: Iterable[str], cutoff: float = CUTOFF) -> str | None:
    """The known key `key` most likely misspells, or None."""
    import difflib  # only for a key that is wrong: not at every start

    found = difflib.get_close_matches(key, list(known), n=1, cutoff=cutoff)
    return found[0] if found else None


def unknown_key(key: str, known: Iterable[str]) -> str:
    """`unknown key 'worskpace' (did you mean 'workspace'?)`, else the known keys listed."""
    known = sorted(known)
    guess = closest(key, known)
    hint = f"did you mean {guess!r}?" if guess else f"known keys: {', '.join(known)}"
    return f"unknown key {key!r} ({hint})"


def unknown_keys(keys: Iterable[str], known: Iterable[str]) -> list[str]:
    """One `unknown_key` message per key not in `known`, in the order given."""
    known = list(known)
    return [unknown_key(key, known) for key in keys if key not in known]
