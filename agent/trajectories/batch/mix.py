"""`--toolset-mix`: one run as an A/B test of toolsets, a toolset drawn per task.

    mix = parse_mix("core=0.5,core-execute_code=0.5")
    arm = mix.choose("task-17", seed=0)        # Arm("core-execute_code", (tools...), 0.5)

A mix is comma-separated `ARM=WEIGHT` entries. An arm is toolset or tool names joined by
`+` (add) and `-` (take away), read left to right: `core+web`, `core-execute_code`,
`read_file+write_file+terminal`. Weights are positive numbers, relative to each other (they
need not sum to 1). Every name must be a known toolset or tool, no two arms may give the same
tools (an A/B test of two equal arms measures nothing: `core` already holds `execute_code`),
and an arm may not be empty; anything else is a ValueError naming the entry and the fix.

The draw is deterministic per task id: SHA-256 of `"{seed}:{task id}"` gives a number u in
[0, 1), and the arm is the first whose cumulative share of the total weight exceeds u. So
`--resume` (and a re-run with the same seed) gives every task the same arm, in any order and
on any worker, and all attempts of a task share it. A task line with its own `toolsets`
keeps them: the mix draws for the other tasks only.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_SEED = 0
"""The seed of a mix run without `--seed` (recorded in the run's options either way)."""
MAX_ARMS = 32
_TERM = re.compile(r"([+-])")


@dataclass(frozen=True, slots=True)
class Arm:
    label: str
    """The arm as written (spaces removed): what lines and statistics group by."""
    tools: tuple[str, ...]
    weight: float


@dataclass(frozen=True, slots=True)
class Mix:
    spec: str
    arms: tuple[Arm, ...]

    def choose(self, task_id: str, seed: int) -> Arm:
        """The arm of `task_id` under `seed` (the same on every call, in every process)."""
        digest = hashlib.sha256(f"{seed}:{task_id}".encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        total = sum(a.weight for a in self.arms)
        edge = 0.0
        for arm in self.arms:
            edge += arm.weight / total
            if u < edge:
                return arm
        return self.arms[-1]  # u within float rounding of 1

    def shares(self) -> dict[str, float]:
        total = sum(a.weight for a in self.arms)
        return {a.label: round(a.weight / total, 6) for a in self.arms}


def parse_mix(spec: str) -> Mix:
    """The mix `spec` describes; ValueError (one line, naming the entry) when it cannot run."""
    from talaria.agent.trajectories.batch.worker import resolve_tools

    entries = [e.strip() for e in spec.split(",") if e.strip()]
    if not entries:
        raise ValueError('--toolset-mix is empty: give ARM=WEIGHT entries, e.g. '
                         '"core=0.5,core-execute_code=0.5"')
    if len(entries) > MAX_ARMS:
        raise ValueError(f"--toolset-mix has {len(entries)} arms; at most {MAX_ARMS}")
    arms: list[Arm] = []
    for entry in entries:
        label, eq, weight_text = entry.rpartition("=")
        label = "".join(label.split())
        if not eq or not label:
            raise ValueError(f"--toolset-mix entry {entry!r}: write ARM=WEIGHT, e.g. core=0.5")
        weight = _weight(entry, weight_text)
        tools = _tools(entry, label, resolve_tools)
        for other in arms:
            if other.label == label:
                raise ValueError(f"--toolset-mix names the arm {label!r} twice: give each arm once")
            if set(other.tools) == set(tools):
                raise ValueError(
                    f"--toolset-mix arms {other.label!r} and {label!r} give the same tools "
                    f"({', '.join(tools)}): an A/B test needs arms that differ (take a tool "
                    "away with '-', e.g. core-execute_code)")
        arms.append(Arm(label, tools, weight))
    return Mix(",".join(f"{a.label}={a.weight:g}" for a in arms), tuple(arms))


def _weight(entry: str, text: str) -> float:
    try:
        weight = float(text)
    except ValueError:
        weight = math.nan
    if not (math.isfinite(weight) and weight > 0):
        raise ValueError(f"--toolset-mix entry {entry!r}: the weight must be a positive number")
    return weight


def _tools(entry: str, label: str, resolve: Callable[[tuple[str, ...]], tuple[str, ...]]) -> tuple[str, ...]:
    """The tool names of `label` (names joined by + and -), in catalog order."""
    parts = _TERM.split(label)
    if parts[0] == "" or any(p == "" for p in parts[::2]):
        raise ValueError(f"--toolset-mix entry {entry!r}: an arm is names joined by + and -, "
                         "e.g. core+web or core-execute_code")
    names: dict[str, None] = {}
    sign = "+"
    for part in parts:
        if part in ("+", "-"):
            sign = part
            continue
        try:
            found = resolve((part,))
        except ValueError as exc:
            raise ValueError(f"--toolset-mix entry {entry!r}: {exc}") from None
        if sign == "+":
            names.update(dict.fromkeys(found))
        else:
            for name in found:
                names.pop(name, None)
    if not names:
        raise ValueError(f"--toolset-mix entry {entry!r}: the arm leaves no tools")
    return tuple(names)


def mix_summary(mix: Mix, seed: int, drawn: dict[str, Arm]) -> dict[str, object]:
    """statistics.json's `toolset_mix`: the spec, its seed, and per arm its weight, share,
    tools and how many tasks drew it (their figures are `verification.by_toolset`)."""
    counts = {a.label: 0 for a in mix.arms}
    for arm in drawn.values():
        counts[arm.label] += 1
    shares = mix.shares()
    return {"spec": mix.spec, "seed": seed, "tasks": len(drawn),
            "arms": {a.label: {"weight": a.weight, "share": shares[a.label],
                               "tools": list(a.tools), "tasks": counts[a.label]}
                     for a in mix.arms}}
