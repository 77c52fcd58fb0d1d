"""Trajectory exports: ShareGPT (Hermes), OpenAI Chat Completions, ATIF. Secrets redacted.

    export(trajectories, "sharegpt" | "openai" | "atif", catalog) -> text to write

    sharegpt  one JSON line per trajectory, Hermes Agent's batch format   (sharegpt.py)
    openai    one JSON line per trajectory: {"messages", "tools"}         (openai.py)
    atif      one ATIF document (pretty JSON), or one per line for many   (atif.py)

Every format goes through `redact.redact` last, so no exporter can forget it; before that,
tool results marked `withheld` when stored (what a secret path held: `talaria.agent.withheld`)
lose their content to a note, as in `session_search` (the raw transcript keeps it).

May import the trajectory model and `talaria.tools` (redaction, the tool catalog).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from talaria.agent.trajectories.export.common import ToolCatalog
from talaria.agent.trajectories.model import Trajectory
from talaria.tools.redact import WITHHELD, quoted_words, redact, scrub, withhold

__all__ = ["FORMATS", "ExportError", "ToolCatalog", "export"]

FORMATS = ("sharegpt", "openai", "atif")


class ExportError(ValueError):
    """Trajectories that could not be converted; `failures` is [(where, reason)]."""

    def __init__(self, failures: list[tuple[str, str]], total: int) -> None:
        self.failures = failures
        shown = "; ".join(f"{where}: {why}" for where, why in failures[:10])
        more = f"; and {len(failures) - 10} more" if len(failures) > 10 else ""
        super().__init__(f"{len(failures)} of {total} trajectories cannot be converted "
                         f"({shown}{more}); nothing was exported")


def export(trajectories: Sequence[Trajectory], fmt: str, catalog: ToolCatalog) -> str:
    """The trajectories in `fmt`, redacted, as the text of one output file: one record per
    trajectory, in order. Raises ExportError naming every one that cannot be converted."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    convert = _converter(fmt, catalog)
    records: list[dict[str, Any]] = []
    failures: list[tuple[str, str]] = []
    for position, traj in enumerate(trajectories):
        try:
            records.append(redact(convert(position, _withheld(traj))))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            where = str(traj.extra.get("origin") or traj.session_id)
            failures.append((where, f"{type(exc).__name__}: {exc}"))
    if failures:
        raise ExportError(failures, len(trajectories))
    if fmt == "atif" and len(records) == 1:
        return json.dumps(records[0], ensure_ascii=False, indent=2) + "\n"
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def _converter(fmt: str, catalog: ToolCatalog) -> Any:
    if fmt == "sharegpt":
        from talaria.agent.trajectories.export.sharegpt import to_sharegpt

        def sharegpt(position: int, traj: Trajectory) -> dict[str, Any]:
            index = traj.extra.get("prompt_index")  # a source line keeps its dataset index
            return to_sharegpt(traj, catalog, prompt_index=index if isinstance(index, int) else position)

        return sharegpt
    if fmt == "openai":
        from talaria.agent.trajectories.export.openai import to_openai

        return lambda position, traj: to_openai(traj, catalog)
    from talaria.agent.trajectories.export.atif import to_atif

    return lambda position, traj: to_atif(traj)


def _withheld(traj: Trajectory) -> Trajectory:
    """Withheld results lose their content, and the rest of the trajectory their telling words
    (an answer quoting the key a tool read)."""
    texts = [str(m.get("content") or "") for m in _with_subagents(traj.messages) if m.get(WITHHELD)]
    if not texts:
        return traj
    quoted = quoted_words(texts)
    messages = tuple(withhold(m) for m in scrub(list(traj.messages), quoted))
    return dataclasses.replace(traj, messages=messages)


def _with_subagents(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    out = list(messages)
    for m in messages:
        for run in m.get("subagents") or ():
            if isinstance(run, dict):
                out += _with_subagents(run.get("messages") or [])
    return out
