"""What `talaria batch TASKS` runs, whatever form TASKS has:

    a directory                  Harbor task directories (harbor.py)
    JSONL with "instance_id"s    SWE-bench instances, run against `--repos DIR` (swebench.py)
    any other JSONL              task lines (tasks.py)

Every form becomes the same `Task`s; a bad one is one TaskFileError line naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path

from talaria.agent.trajectories.batch.tasks import Task, TaskFileError, load_tasks


def load_dataset(path: Path, *, repos: Path | None = None) -> list[Task]:
    if path.is_dir():
        from talaria.agent.trajectories.batch.harbor import load_harbor

        return load_harbor(path)
    if not path.exists():
        raise TaskFileError(f"{path}: no such file or directory (give a tasks file, a directory "
                            "of Harbor tasks, or SWE-bench instances)")
    if is_swebench(path):
        from talaria.agent.trajectories.batch.swebench import load_swebench

        return load_swebench(path, repos)
    return load_tasks(path)


def is_swebench(path: Path) -> bool:
    """Whether the file's first line is a SWE-bench instance (it has an `instance_id`)."""
    try:
        with path.open(encoding="utf-8") as lines:
            first = next((line for line in lines if line.strip()), "")
        data = json.loads(first)
    except (OSError, UnicodeDecodeError, ValueError):
        return False  # load_tasks names the problem with its line
    return isinstance(data, dict) and "instance_id" in data
