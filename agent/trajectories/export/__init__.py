"""Trajectory exports: ShareGPT (Hermes), OpenAI Chat Completions, ATIF. Secrets redacted.

    export(trajectories, "sharegpt" | "openai" | "atif", catalog, prices) -> text to write
    select(trajectories, solved_only=..., min_reward=...) -> the ones a training set keeps

    sharegpt  one JSON line per trajectory, Hermes Agent's batch format   (sharegpt.py)
    openai    one JSON line per trajectory: {"messages", "tools"}         (openai.py)
    atif      one ATIF document (pretty JSON), or one per line for many   (atif.py), each
              validated against the `atif` package's models before anything is written

Every record carries its outcome: `reward`, `resolved` (the verifier's, from a batch line;
None for a session) and `cost_usd` (`common.outcome`) — top-level keys of a ShareGPT or
OpenAI line, ATIF's `final_metrics.total_cost_usd` and the document's `extra`.

Every format goes through `redact.redact` last, so no exporter can forget it; before that,
tool results marked `withheld` when stored (what a secret path held: `talaria.agent.withheld`)
lose their content to a note, as in `session_search` (the raw transcript keeps it).

May import the trajectory model and `talaria.tools` (redaction, the tool catalog).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from talaria.agent.trajectories.export.common import ToolCatalog, outcome
from talaria.agent.trajectories.model import Trajectory
from talaria.tools.redact import WITHHELD, quoted_words, redact, scrub, withhold

__all__ = ["FORMATS", "ExportError", "ToolCatalog", "export", "select"]

FORMATS = ("sharegpt", "openai", "atif")


class ExportError(ValueError):
    """Trajectories that could not be converted; `failures` is [(where, reason)]."""

    def __init__(self, failures: list[tuple[str, str]], total: int) -> None:
        self.failures = failures
        shown = "; ".join(f"{where}: {why}" for where, why in failures[:10])
        more = f"; and {len(failures) - 10} more" if len(failures) > 10 else ""
        super().__init__(f"{len(failures)} of {total} trajectories cannot be converted "
                         f"({shown}{more}); nothing was exported")


def select(trajectories: Sequence[Trajectory], *, solved_only: bool = False,
           min_reward: float | None = None) -> list[Trajectory]:
    """The trajectories a training set keeps: solved ones (`resolved` true) with
    `solved_only`, ones whose reward is at least `min_reward` with it (no verdict: left out)."""
    kept = []
    for traj in trajectories:
        reward, resolved = traj.extra.get("reward"), traj.extra.get("resolved")
        if solved_only and resolved is not True:
            continue
        if min_reward is not None and not (isinstance(reward, int | float) and reward >= min_reward):
            continue
        kept.append(traj)
    return kept


def export(trajectories: Sequence[Trajectory], fmt: str, catalog: ToolCatalog,
           prices: Mapping[str, Any] | None = None, *, lines: bool | None = None) -> str:
    """The trajectories in `fmt`, redacted, as the text of one output file: one record per
    trajectory, in order. `prices`: config's `[prices]` (the cost of each record). `lines`:
    ATIF as one document per line even for one (None: a lone document is pretty JSON). Raises
    ExportError naming every one that cannot be converted (an ATIF document that does not
    validate among them)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    convert = _converter(fmt, catalog, prices)
    records: list[dict[str, Any]] = []
    failures: list[tuple[str, str]] = []
    for position, traj in enumerate(trajectories):
        try:
            record = redact(convert(position, _withheld(traj)))
            if fmt == "atif":
                from talaria.agent.trajectories.export.atif import validate

                validate(record)
            records.append(record)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            where = str(traj.extra.get("origin") or traj.session_id)
            failures.append((where, f"{type(exc).__name__}: {exc}"))
    if failures:
        raise ExportError(failures, len(trajectories))
    if fmt == "atif" and len(records) == 1 and not lines:
        return json.dumps(records[0], ensure_ascii=False, indent=2) + "\n"
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def _converter(fmt: str, catalog: ToolCatalog, prices: Mapping[str, Any] | None) -> Any:
    if fmt == "sharegpt":
        from talaria.agent.trajectories.export.sharegpt import to_sharegpt

        def sharegpt(position: int, traj: Trajectory) -> dict[str, Any]:
            index = traj.extra.get("prompt_index")  # a source line keeps its dataset index
            line = to_sharegpt(traj, catalog, prompt_index=index if isinstance(index, int) else position)
            return line | outcome(traj, prices)

        return sharegpt
    if fmt == "openai":
        from talaria.agent.trajectories.export.openai import to_openai

        return lambda position, traj: to_openai(traj, catalog) | outcome(traj, prices)
    from talaria.agent.trajectories.export.atif import to_atif

    return lambda position, traj: to_atif(traj, catalog=catalog, prices=prices)


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
