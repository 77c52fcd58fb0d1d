"""From pending (task, attempt) pairs to the jobs executors run (see worker.py for JOB).

`prepare_environments` gives each Harbor task its container image before anything runs:
`[environment] docker_image`, or its `environment/Dockerfile` built once per content
(images.py). A `--env` given for the run wins (the Dockerfile is then not used). An image
that cannot be built fails that task's attempts at once (`environment_error`, the build's
last output), never the whole run.
"""

from __future__ import annotations

import hashlib
import re
import sys
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from talaria.agent.trajectories.batch.records import make_record
from talaria.agent.trajectories.batch.tasks import Task


@dataclass(slots=True)
class Environments:
    names: dict[str, str] = field(default_factory=dict)
    """task id -> its environment (docker:IMAGE)."""
    errors: dict[str, str] = field(default_factory=dict)
    """task id -> why its environment could not be made."""


def prepare_environments(tasks: dict[str, Task], explicit: str | None,
                         progress_out: TextIO | None = sys.stderr) -> Environments:
    from talaria.agent.trajectories.batch.images import ImageError, ensure_image

    out = Environments()
    builds: dict[str, list[str]] = {}
    for task in tasks.values():
        source = task.source or {}
        if source.get("format") != "harbor" or task.environment or explicit:
            continue
        if source.get("image"):
            out.names[task.id] = f"docker:{source['image']}"
        elif source.get("build"):
            builds.setdefault(source["build"]["context"], []).append(task.id)
    if builds and progress_out is not None:
        print(f"talaria batch: {len(builds)} task image(s) to check or build", file=progress_out)
    engine = _engine()
    for context, ids in builds.items():
        timeout = float((tasks[ids[0]].source or {})["build"]["timeout"])
        try:
            tag = ensure_image(Path(context), timeout=timeout, engine=engine)
        except ImageError as exc:
            out.errors.update(dict.fromkeys(ids, str(exc)))
            continue
        out.names.update(dict.fromkeys(ids, f"docker:{tag}"))
    return out


def _engine() -> str | None:
    from talaria.agent.config import load_config

    try:
        return load_config().environments.get("docker", {}).get("engine")
    except ValueError:
        return None


def task_dir_name(task_id: str, attempt: int = 1) -> str:
    """A directory name for any id: readable prefix + hash (ids may hold '/', '..', spaces)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", task_id)[:48].lstrip(".") or "task"
    suffix = "" if attempt == 1 else f"-a{attempt}"
    return f"{safe}-{hashlib.sha256(task_id.encode()).hexdigest()[:8]}{suffix}"


def job_for(task: Task, attempt: int, environments: Environments, effective: dict[str, Any],
            options: Any, run_dir: Path, arm: Any = None) -> dict[str, Any]:
    """The job of one attempt; `arm` (a mix.Arm) is the toolset the task drew."""
    if task.id in environments.names:
        task = replace(task, environment=environments.names[task.id])
    job = {"task": task.to_dict(), "model": effective["model"],
           "max_turns": effective["max_turns"], "toolsets": effective["toolsets"],
           "timeout": task.timeout or effective["task_timeout"],
           "check_timeout": (task.check or {}).get("timeout", 0.0),
           "environment": effective.get("environment"),
           "task_dir": str((run_dir / "tasks" / task_dir_name(task.id, attempt)).resolve()),
           "keep": options.keep_workspaces, "session_id": uuid.uuid4().hex,
           # A task's checkpoints live in its worker's home, which goes at the end of the run
           # unless workspaces are kept: only then are they worth their git commands (about
           # half of a small task's time outside the model).
           "checkpoints": None if options.keep_workspaces and not options.no_checkpoints else False,
           "attempt": attempt, "agent": effective["agent"], "max_cost": effective["max_cost"],
           "skills": effective.get("skills"), "skill_set": effective.get("skill_set")}
    if arm is not None:
        job["toolsets"], job["toolset_arm"] = list(arm.tools), arm.label
    if task.id in environments.errors:
        job["failed"] = make_record(job["task"], status="failed", reason="environment_error",
                                    error=environments.errors[task.id], messages=[],
                                    model=task.model or effective["model"], duration_s=0.0, job=job)
    return job


def check_prices(effective: dict[str, Any], tasks: list[Task]) -> None:
    """`--max-cost` needs a price for every model the run uses: ValueError naming the first
    model without one, and how to give it."""
    if effective.get("max_cost") is None or effective.get("agent") not in (None, "talaria"):
        return
    from talaria.agent.config import load_config
    from talaria.agent.pricing import price_for

    config = load_config()
    default = effective.get("model") or config.model
    for model in sorted({t.model or default or "" for t in tasks}):
        if price_for(model, config.prices) is None:
            raise ValueError(f"--max-cost needs the price of {model or 'the model'}: add "
                             f"[prices.\"{model}\"] input = ..., output = ... (dollars per "
                             "million tokens) to config.toml")
