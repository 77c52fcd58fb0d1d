"""Does a skill set help? Each skill judged by two runs of the same tasks: one with the set
(`talaria batch --skills SET`), the baseline with none (`--skills none`).

    verdicts = judge(store, with_run, baseline)     -> [SkillVerdict], one per skill of the set
    curate_by_runs(store, verdicts, dry_run=False)  -> the names archived

A skill's tasks are the tasks both runs ran on which the run with the set viewed it
(`skill_view` with its name, in any attempt). Its rate in a run is the mean, over those tasks,
of the share of the task's attempts that were resolved. It *beats the baseline* when its rate
with the set is higher than the baseline's on the same tasks; a skill no task viewed has no
verdict (kept, reported unused). `curate_by_runs` archives (history kept, `talaria skills
restore`) the skills that were used and did not beat the baseline; pinned skills stay.

The runs must say so: the first recorded `--skills SET` in its checkpoint, the baseline
`--skills none`; runs that share no task, or without verdicts, are refused (MeasureError).
This is evidence, not proof: with few tasks per skill the difference is noise, which is why
the task counts are in every verdict (`talaria trajectories compare` gives the run-level test).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from talaria.agent.skills.learn import LearnError, read_run
from talaria.agent.transcript import calls_of
from talaria.tools.skills.sets import NONE
from talaria.tools.skills.store import SkillStore


class MeasureError(ValueError):
    """Runs that cannot judge a set; the message names the run and what to do."""


@dataclass(slots=True)
class RunOutcome:
    path: Path
    skills: str | None
    """The run's `--skills` (a set's name, `none`, or None: not given)."""
    resolved: dict[str, list[bool]] = field(default_factory=dict)
    """task id -> whether each checked attempt was resolved."""
    viewed: dict[str, set[str]] = field(default_factory=dict)
    """task id -> the skills its attempts viewed."""

    def rate(self, tasks: list[str]) -> float:
        shares = [sum(self.resolved[t]) / len(self.resolved[t]) for t in tasks]
        return sum(shares) / len(shares)


@dataclass(frozen=True, slots=True)
class SkillVerdict:
    name: str
    tasks: tuple[str, ...]
    """Tasks both runs checked on which the run with the set viewed this skill."""
    with_set: float | None
    baseline: float | None

    @property
    def beats(self) -> bool | None:
        """Whether the runs that used it did better than the baseline (None: never used)."""
        if self.with_set is None or self.baseline is None:
            return None
        return self.with_set > self.baseline

    def to_dict(self) -> dict[str, Any]:
        return {"skill": self.name, "tasks": list(self.tasks), "with_set": self.with_set,
                "baseline": self.baseline, "beats_baseline": self.beats}


def outcome(run: Path) -> RunOutcome:
    """What a batch run resolved and which skills it viewed, per task."""
    from talaria.agent.trajectories.export.sharegpt import parse_sharegpt

    try:
        lines = read_run(run)
    except LearnError as exc:
        raise MeasureError(str(exc)) from None
    found = RunOutcome(run, _skills_option(run))
    for line in lines:
        task = str(line.get("task_id"))
        if line.get("resolved") is not None:
            found.resolved.setdefault(task, []).append(bool(line["resolved"]))
        names = found.viewed.setdefault(task, set())
        for message in parse_sharegpt(line):
            for call in calls_of(message):
                if call["name"] == "skill_view" and (name := _skill_named(call)) is not None:
                    names.add(name)
    return found


def judge(store: SkillStore, set_name: str, with_run: Path, baseline: Path) -> list[SkillVerdict]:
    """One verdict per skill of the set (`store` over it), by the two runs' verdicts."""
    treated, control = outcome(with_run), outcome(baseline)
    if treated.skills != set_name:
        ran = f"--skills {treated.skills}" if treated.skills else "without --skills"
        raise MeasureError(f"{with_run} ran {ran}, not --skills {set_name}: give the run "
                           f"made with the set")
    if control.skills != NONE:
        ran = f"--skills {control.skills}" if control.skills else "without --skills"
        raise MeasureError(f"{baseline} ran {ran}: the baseline is a run of the same tasks "
                           "with --skills none")
    shared = sorted(set(treated.resolved) & set(control.resolved))
    if not shared:
        for run in (treated, control):
            if not run.resolved:
                raise MeasureError(f"{run.path} has no checked task (no verdict to compare)")
        raise MeasureError(f"{with_run} and {baseline} share no checked task: run the same "
                           "tasks with the set and with --skills none")
    verdicts = []
    for name in sorted(store.scan()):
        tasks = [t for t in shared if name in treated.viewed.get(t, ())]
        if not tasks:
            verdicts.append(SkillVerdict(name, (), None, None))
            continue
        verdicts.append(SkillVerdict(name, tuple(tasks), round(treated.rate(tasks), 6),
                                     round(control.rate(tasks), 6)))
    return verdicts


def curate_by_runs(store: SkillStore, verdicts: list[SkillVerdict], *,
                   dry_run: bool = False) -> list[str]:
    """Archive the skills that were used and did not beat the baseline (never a pinned one);
    returns their names."""
    skills = store.scan()
    archived = []
    for verdict in verdicts:
        skill = skills.get(verdict.name)
        if verdict.beats is False and skill is not None and not skill.pinned:
            archived.append(verdict.name)
            if not dry_run:
                store.archive(skill)
    return archived


def _skill_named(call: dict[str, Any]) -> str | None:
    try:
        arguments = json.loads(call.get("arguments") or "{}")
    except ValueError:
        return None
    name = arguments.get("name") if isinstance(arguments, dict) else None
    return name if isinstance(name, str) else None


def _skills_option(run: Path) -> str | None:
    """The `--skills` a run recorded in its checkpoint (None: not given, or no checkpoint)."""
    from talaria.agent.trajectories.batch.checkpoint import previous_options

    directory = run if run.is_dir() else run.parent
    value = previous_options(directory).get("skills")
    return value if isinstance(value, str) else None
