"""`talaria skills learn RUN --into SET`: the background review, run over a batch run's solved
trajectories, writing skills into a skill set (tools/skills/sets.py).

    report = anyio.run(learn, run_dir, set_folder, config, model)

For each task the run solved (`resolved`: its check passed; the first solved attempt of each
task, in the run's order), one review: a session of its own whose whole skill library is the
set (its index in the system prompt, so it patches a skill it has rather than adding a copy),
the solved conversation replayed after that system prompt (or, with `review_model`, the same
compact digest the background review gives another model), then the review's skill question.
Its tools are the skill tools only (no memory: what a batch taught is not a fact about the
user), bounded like the background review (`REVIEW_MAX_CALLS` model calls, `REVIEW_TIMEOUT_S`).
Every write records its run and task in the skill's `provenance.json`; the set's ledger
(`set.json`) gets one entry for the whole learn. Reviews run one after another: the second one
sees what the first one saved.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio

from talaria.agent.config import Config
from talaria.agent.door import LocalDoor
from talaria.agent.loop import run_turn
from talaria.agent.providers.errors import AuthError
from talaria.agent.runtime import Opening, dangling_results, make_provider, new_session
from talaria.agent.skills.review import (
    REVIEW_MAX_CALLS,
    REVIEW_TIMEOUT_S,
    SKILL_ASK,
    digest,
)
from talaria.agent.transcript import Message, is_system
from talaria.tools.local.workspace import LocalWorkspace
from talaria.tools.skills.sets import add_to_ledger

LEARN_TOOLS = ("skills_list", "skill_view", "skill_manage")
LEARN_PROMPT = """\
[Skill learning — nobody reads this live.] The conversation above solved task {task}: its \
check passed. Look back at how it was solved.
{ask}
Only save what will help solve similar tasks. If nothing is worth saving, reply \
"Nothing to save." and stop."""
TRAJECTORIES = "trajectories.jsonl"


class LearnError(ValueError):
    """A run that cannot be learned from; the message says which and what to do."""


@dataclass(slots=True)
class Learned:
    task_id: str
    attempt: int
    changes: list[str] = field(default_factory=list)
    """What the review did ("Saved skill `x`", "Updated skill `x`")."""
    error: str | None = None
    """Why the review failed (one line); what it saved before stays saved."""


@dataclass(slots=True)
class LearnReport:
    run: Path
    skill_set: Path
    model: str
    read: int
    """Lines of the run (attempts)."""
    tasks: list[Learned] = field(default_factory=list)


def run_file(run: Path) -> Path:
    """The trajectories file of a batch run (its directory, or the file), else LearnError."""
    path = run / TRAJECTORIES if run.is_dir() else run
    if not path.is_file():
        raise LearnError(f"no batch run at {run} (a directory with {TRAJECTORIES}, as "
                         "`talaria batch` writes)")
    return path


def solved(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first solved attempt of each task, in the run's order."""
    seen: set[str] = set()
    kept = []
    for line in lines:
        task = str(line.get("task_id"))
        if line.get("resolved") is True and task not in seen:
            seen.add(task)
            kept.append(line)
    return kept


def read_run(run: Path) -> list[dict[str, Any]]:
    """Every line of a run's trajectories, or LearnError naming what is wrong with them."""
    from talaria.agent.trajectories.lines import trajectory_lines
    from talaria.agent.trajectories.model import TrajectoryNotFound

    try:
        return trajectory_lines(run_file(run), "nothing was learned")
    except TrajectoryNotFound as exc:
        raise LearnError(str(exc)) from None


async def learn(run: Path, skill_set: Path, config: Config, model: str | None = None) -> LearnReport:
    """Review each solved trajectory of `run` into `skill_set` (made if new). Raises
    LearnError before any model call when the run has nothing solved to learn from."""
    from talaria.agent.trajectories.export.sharegpt import parse_sharegpt

    lines = read_run(run)
    wins = solved(lines)
    if not wins:
        checked = sum(line.get("resolved") is not None for line in lines)
        why = (f"{checked} checked attempt(s), none resolved" if checked
               else "no task has a check (a task line's `check`, a Harbor task's tests)")
        raise LearnError(f"nothing to learn from in {run}: {len(lines)} attempt(s), {why}")
    chosen = model or config.review_model or config.model
    report = LearnReport(run.resolve(), skill_set, str(chosen), len(lines))
    config = replace(config, skill_set=skill_set, max_turns=REVIEW_MAX_CALLS)
    provider = make_provider(config, chosen)  # no model: nothing made
    skill_set.mkdir(parents=True, exist_ok=True)
    for line in wins:
        done = Learned(str(line["task_id"]), int(line.get("attempt") or 1))
        report.tasks.append(done)
        try:
            await _review(config, provider, parse_sharegpt(line), report, done)
        except AuthError:
            raise  # no model or a refused key: every review would fail the same way
        except TimeoutError:
            done.error = f"the review took longer than {REVIEW_TIMEOUT_S:g}s"
        except Exception as exc:  # one review's failure is said; the others still run
            done.error = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    add_to_ledger(skill_set, {
        "run": str(report.run), "model": report.model,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tasks": [{"task_id": t.task_id, "attempt": t.attempt, "changes": t.changes,
                   **({"error": t.error} if t.error else {})} for t in report.tasks]})
    return report


async def _review(config: Config, provider: Any, messages: list[Message], report: LearnReport,
                  done: Learned) -> None:
    """One task's review in a session of its own (an empty directory: nothing to read); what
    it changed goes into `done` even when it fails half-way."""
    with tempfile.TemporaryDirectory(prefix="talaria-learn-") as tmp:
        cwd = Path(tmp)
        opening = Opening(cwd, session_id=f"learn-{done.task_id}", mode="dont_ask",
                          tool_names=LEARN_TOOLS, allowed_tools=frozenset(LEARN_TOOLS))
        session = new_session(config, opening, door=LocalDoor(LocalWorkspace(cwd)),
                              provider=provider, store=None)
        state = session.tool_state.skills
        assert state is not None
        try:
            state.actor = "review"
            state.provenance = {"run": str(report.run), "task": done.task_id,
                                "attempt": done.attempt}
            conversation = [m for m in messages if not is_system(m)]  # ShareGPT's own prompt
            if config.review_model is not None:
                conversation = digest([session.messages[0], *conversation])[1:]
            history: list[Message] = [session.messages[0], *conversation]
            history += [dict(r) for r in dangling_results(history)]  # cut off mid-call
            session.context.replace(history)
            with anyio.fail_after(REVIEW_TIMEOUT_S):
                await run_turn(session, LEARN_PROMPT.format(task=done.task_id, ask=SKILL_ASK))
        finally:
            done.changes = list(state.changes)
            session.close()
