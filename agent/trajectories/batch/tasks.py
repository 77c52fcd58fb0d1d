"""Batch tasks: one JSON object per line of a tasks file.

    {"prompt": str,                   required
     "id"?: str,                      stable id; default: a hash of the line's content
     "workspace"?: str,               a template directory copied fresh for this task
     "cwd"?: str,                     an existing directory used as is (not isolated)
     "model"?: str, "toolsets"?: [str],
     "environment"?: str,             where it runs (NAME[:ARG], see `talaria.tools.environments`):
                                      each task gets its own container or sandbox
     "check"?: str | {"command": str, "timeout"?: seconds, "env"?: {NAME: str}},
                                      the verifier: run where the task ran, after the agent;
                                      exit 0 = solved, or the reward it writes (verifier.py)
     "tests"?: str,                   a directory copied in for the check only (never seen by
                                      the agent): /tests in a container (verifier.py)
     "solution"?: str,                a directory with solve.sh: what `--agent oracle` runs
     "tags"?: [str],                  groups in statistics.json (`by_tag`)
     "timeout"?: seconds}             the agent's wall time for this task (--task-timeout)

Any other key is an error that names it and the closest known key (a misspelt "workspace"
would otherwise run the task in an empty directory).

A task's `index` is its 0-based position among the file's tasks (blank lines skipped, as
Hermes' batch runner counts): it becomes the `prompt_index` of its trajectory line, which
downstream tools join on. Relative paths are taken from the tasks file's directory. Without `workspace` or `cwd` a task
runs in a fresh empty directory. The id is what `--resume` matches on, so it must not depend on
the line's position: an id-less line is named by the SHA-256 of its canonical JSON, and a
repeated identical line gets `-2`, `-3`, ... in order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from talaria.agent.trajectories.batch.checks import check_of, seconds_of, tags_of
from talaria.tools.keys import unknown_keys

KEYS: dict[str, str] = {
    "prompt": "what the agent is asked", "id": "stable task id", "workspace": "template directory",
    "cwd": "directory used as is", "model": "provider:model", "toolsets": "toolset or tool names",
    "environment": "NAME[:ARG]", "check": "the verifier command", "tests": "verifier-only files",
    "solution": "directory with solve.sh (--agent oracle)", "tags": "statistics groups",
    "timeout": "agent wall seconds",
}
"""Every key a task line may have, with what it is."""
MAX_PROMPT_CHARS = 1_000_000
"""A prompt longer than this is a mistake in the tasks file (a whole dataset on one line)."""
ID_HEX = 16


class TaskFileError(ValueError):
    """A tasks file that cannot be run; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class Task:
    id: str
    prompt: str
    workspace: str | None = None
    cwd: str | None = None
    model: str | None = None
    toolsets: tuple[str, ...] | None = None
    environment: str | None = None
    index: int = 0
    """0-based position in the tasks file (the line's `prompt_index`)."""
    check: dict[str, Any] | None = None
    """{"command": str, "timeout": float, "env": {str: str}} (see checks.py)."""
    tests: str | None = None
    solution: str | None = None
    tags: tuple[str, ...] = ()
    timeout: float | None = None
    source: dict[str, Any] | None = None
    """What a dataset format adds (`"format": "harbor" | "swebench"`; see harbor.py, swebench.py)."""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["toolsets"] = list(self.toolsets) if self.toolsets is not None else None
        data["tags"] = list(self.tags)
        return data



def json_lines(path: Path) -> Iterator[tuple[int, str, Any]]:
    """(line number, `path:line`, the parsed object) for every non-blank line of a JSONL file; a file that
    cannot be read or a line that is not JSON is a TaskFileError naming it."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskFileError(f"{path}: {exc}") from exc
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            yield number, where, json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskFileError(f"{where}: not JSON ({exc})") from exc


def load_tasks(path: Path) -> list[Task]:
    """Every task of `path`, in file order. Raises TaskFileError on the first bad line."""
    base = path.resolve().parent
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for number, where, data in json_lines(path):
        task = replace(_task(data, base, where), index=len(tasks))
        if task.id in seen:
            if "id" in data:
                raise TaskFileError(f"{where}: duplicate id {task.id!r} (first on line {seen[task.id]})")
            task = replace(task, id=_nth(task.id, seen))
        seen[task.id] = number
        tasks.append(task)
    return tasks


def _nth(base_id: str, seen: dict[str, int]) -> str:
    n = 2
    while f"{base_id}-{n}" in seen:
        n += 1
    return f"{base_id}-{n}"


def _task(data: Any, base: Path, where: str) -> Task:
    if not isinstance(data, dict):
        raise TaskFileError(f"{where}: a task is a JSON object with a \"prompt\"")
    if unknown := unknown_keys(data, KEYS):
        raise TaskFileError(f"{where}: {unknown[0]}; a task's keys are {', '.join(KEYS)}")
    prompt = data.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise TaskFileError(f"{where}: \"prompt\" must be a non-empty string")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise TaskFileError(f"{where}: prompt longer than {MAX_PROMPT_CHARS} characters")
    if data.get("workspace") and data.get("cwd"):
        raise TaskFileError(f"{where}: give \"workspace\" (copied) or \"cwd\" (used as is), not both")
    task_id = data.get("id")
    if task_id is None:
        canonical = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        task_id = hashlib.sha256(canonical.encode()).hexdigest()[:ID_HEX]
    elif not isinstance(task_id, str | int) or not str(task_id).strip():
        raise TaskFileError(f"{where}: \"id\" must be a non-empty string")
    toolsets = data.get("toolsets")
    if isinstance(toolsets, str):
        toolsets = [toolsets]
    if toolsets is not None and not (
        isinstance(toolsets, list) and all(isinstance(t, str) for t in toolsets)
    ):
        raise TaskFileError(f"{where}: \"toolsets\" must be a list of names")
    paths = {}
    for key in ("workspace", "cwd", "tests", "solution"):
        if data.get(key):
            directory = (base / str(data[key])).resolve()
            if not directory.is_dir():
                raise TaskFileError(f"{where}: {key} {directory} is not a directory")
            paths[key] = str(directory)
    model = data.get("model")
    environment = data.get("environment")
    if environment is not None and (not isinstance(environment, str) or not environment.strip()):
        raise TaskFileError(f"{where}: \"environment\" must be a name such as \"docker\"")
    try:
        check = check_of(data.get("check"), where)
        tags = tags_of(data.get("tags"), where)
        timeout = seconds_of(data.get("timeout"), where, "timeout")
    except ValueError as exc:
        raise TaskFileError(str(exc)) from None
    return Task(
        environment=environment,
        id=str(task_id), prompt=prompt, model=str(model) if model else None,
        toolsets=tuple(toolsets) if toolsets is not None else None,
        workspace=paths.get("workspace"), cwd=paths.get("cwd"),
        check=check, tests=paths.get("tests"), solution=paths.get("solution"), tags=tags,
        timeout=timeout,
    )
