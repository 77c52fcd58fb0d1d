"""The run directory `data/NAME/`: `trajectories.jsonl` is the record, `checkpoint.json` its index.

An attempt of a task (`--attempts K`: 1..K; one attempt by default) is finished once its line
is in `trajectories.jsonl`. The line goes in with one
`O_APPEND` write and an fsync, then `checkpoint.json` is replaced (temp file + rename). A
`kill -9` between the two leaves the checkpoint one task behind, never ahead, so `open` rebuilds
it from the trajectories; a last line cut short mid-write (no newline) is cut off the file. That
is what makes `--resume` skip exactly the finished tasks: no duplicates, no losses.

`checkpoint.json` also keeps `runs`: one entry per invocation that ran tasks (executor,
workers, tasks_run, wall_s, ...), updated after every task, so `statistics.json` covers every
resumed invocation, even one that was killed (it is then at most one task behind).

With checks, checkpoint.json also says what each checked attempt scored: `rewards` (name ->
reward) and `resolved` (the names of the solved ones). With `--toolset-mix`, `toolset_arms`
maps each task id to the arm it drew, and `options` keeps the mix and its seed.

`--retry-failed` moves the failed lines it is about to re-run to `attempts.jsonl` (kept as
history) before rewriting `trajectories.jsonl` without them, so the file keeps one line per
attempt. In checkpoint.json an attempt after the first is named `ID#N`.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from talaria.agent.trajectories.batch.records import attempt_key

Key = tuple[str, int]
"""(task id, attempt)."""

log = logging.getLogger(__name__)

TRAJECTORIES = "trajectories.jsonl"
CHECKPOINT = "checkpoint.json"
ATTEMPTS = "attempts.jsonl"
STATISTICS = "statistics.json"


class RunExistsError(Exception):
    """The run directory already holds results and neither --resume nor --retry-failed was given."""


def write_json_atomic(path: Path, data: Any) -> None:
    """Replace `path` whole: readers see the old file or the new one, never half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def append_line(fd: int, record: dict[str, Any]) -> None:
    """One JSON line in one write(2) on an O_APPEND descriptor, then fsync."""
    data = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
    written = os.write(fd, data)
    if written != len(data):  # only on a full disk; the torn line is cut off on the next open
        raise OSError(f"short write to {TRAJECTORIES}: {written} of {len(data)} bytes")
    os.fsync(fd)


class RunDir:
    """The files of one run; `finished` maps every recorded (task id, attempt) to its status."""

    def __init__(self, path: Path, meta: dict[str, Any]) -> None:
        self.path = path
        self.meta = meta
        self.finished: dict[Key, str] = {}
        self.reasons: dict[Key, str] = {}
        self.rewards: dict[Key, float] = {}
        """Each checked attempt's reward (its verdict is in its line)."""
        self.previous_options: dict[str, Any] = {}
        """The options of the run's last invocation (from its checkpoint), if any."""
        self.previous_runs: list[dict[str, Any]] = []
        """The invocations before this one that ran tasks (from the checkpoint)."""
        self._fd: int | None = None

    @property
    def trajectories(self) -> Path:
        return self.path / TRAJECTORIES

    @classmethod
    def open(cls, path: Path, *, meta: dict[str, Any], resume: bool) -> RunDir:
        """Open (creating) a run directory. Raises RunExistsError for a used one unless `resume`,
        and for `resume` with another tasks file than the run was started from."""
        started_from = _read_json(path / CHECKPOINT).get("tasks_file")
        if resume and started_from and meta.get("tasks_file") and started_from != meta["tasks_file"]:
            # Two files' tasks in one run: counts and statistics would mix them.
            raise RunExistsError(
                f"{path} was started from {started_from}, not {meta['tasks_file']}: resume it "
                "with that file, or choose another --run-name for this one")
        path.mkdir(parents=True, exist_ok=True)
        run = cls(path, meta)
        run.previous_options, run.previous_runs = _read_checkpoint(path)
        _cut_torn_tail(run.trajectories)
        for record in run.records():
            run._note(record)
        if run.finished and not resume:
            raise RunExistsError(
                f"{path} already has {len(run.finished)} finished task(s); "
                "pass --resume to continue it or choose another --run-name"
            )
        run._fd = os.open(run.trajectories, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        run.write_checkpoint()
        return run

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def records(self) -> Iterator[dict[str, Any]]:
        """Every recorded line, in order; unreadable lines are skipped with a warning."""
        if not self.trajectories.exists():
            return
        with self.trajectories.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                try:
                    record = json.loads(line)
                    record["task_id"]  # noqa: B018 - a line without an id is not a record
                except (ValueError, KeyError, TypeError):
                    log.warning("%s:%d: unreadable line skipped", self.trajectories, number)
                    continue
                yield record

    def append(self, record: dict[str, Any]) -> None:
        """Record one finished task: the trajectory line first, then the checkpoint."""
        if self._fd is None:
            raise RuntimeError("run directory is closed")
        append_line(self._fd, record)
        self._note(record)
        self.write_checkpoint()

    def take_failed(self, ids: set[Key]) -> int:
        """Move the failed lines of `ids` to attempts.jsonl so those attempts can run again."""
        keep: list[str] = []
        moved: list[str] = []
        with self.trajectories.open(encoding="utf-8") as lines:
            for line in lines:
                try:
                    record = json.loads(line)
                except ValueError:
                    keep.append(line)
                    continue
                failed = (record.get("status") == "failed" and "task_id" in record
                          and attempt_key(record) in ids)
                (moved if failed else keep).append(line)
        if not moved:
            return 0
        with (self.path / ATTEMPTS).open("a", encoding="utf-8") as attempts:
            attempts.writelines(moved)
            attempts.flush()
            os.fsync(attempts.fileno())
        # A crash from here on leaves a copy in attempts.jsonl (history), never a loss.
        tmp = self.trajectories.with_name(f".{TRAJECTORIES}.tmp")
        with tmp.open("w", encoding="utf-8") as out:
            out.writelines(keep)
            out.flush()
            os.fsync(out.fileno())
        self.close()
        os.replace(tmp, self.trajectories)
        self._fd = os.open(self.trajectories, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        for task_id in ids:
            if self.finished.get(task_id) == "failed":
                del self.finished[task_id]
                self.reasons.pop(task_id, None)
                self.rewards.pop(task_id, None)
        self.write_checkpoint()
        return len(moved)

    def write_checkpoint(self) -> None:
        completed = [_name(k) for k, status in self.finished.items() if status == "completed"]
        failed = {_name(k): self.reasons.get(k, "") for k, s in self.finished.items() if s == "failed"}
        rewards = {_name(k): r for k, r in self.rewards.items()}
        write_json_atomic(self.path / CHECKPOINT, {
            **self.meta, "completed": completed, "failed": failed,
            "finished": len(self.finished), "updated_at": time.time(),
            **({"rewards": rewards, "resolved": [n for n, r in rewards.items() if r >= 1.0]}
               if rewards else {}),
        })

    def _note(self, record: dict[str, Any]) -> None:
        key = attempt_key(record)
        self.finished[key] = "completed" if record.get("status") == "completed" else "failed"
        self.reasons[key] = str(record.get("reason") or "")
        if isinstance(record.get("reward"), int | float):
            self.rewards[key] = float(record["reward"])


def _name(key: Key) -> str:
    return key[0] if key[1] == 1 else f"{key[0]}#{key[1]}"


def previous_options(path: Path) -> dict[str, Any]:
    """The options of a run directory's last invocation ({} for a new run); read only."""
    return _read_checkpoint(path)[0]


def _read_checkpoint(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(options, runs) of the last invocation's checkpoint. A run written before `runs` were
    kept counts its statistics.json `run` as its one earlier invocation."""
    data = _read_json(path / CHECKPOINT)
    options = data.get("options")
    runs = data.get("runs")
    if not isinstance(runs, list):
        earlier = _read_json(path / STATISTICS).get("run")
        runs = [earlier] if isinstance(earlier, dict) and earlier.get("tasks_run") else []
    return (options if isinstance(options, dict) else {},
            [r for r in runs if isinstance(r, dict)])


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _cut_torn_tail(path: Path) -> None:
    """Drop a last line that a crash cut short (no trailing newline)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size == 0:
        return
    with path.open("rb+") as f:
        step = 1 << 16
        end = size
        while end > 0:  # find the last newline, reading backwards
            start = max(0, end - step)
            f.seek(start)
            chunk = f.read(end - start)
            if end == size and chunk.endswith(b"\n"):
                return
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                keep = start + cut + 1
                break
            end = start
        else:
            keep = 0
        log.warning("%s: dropping a torn last line (%d bytes)", path, size - keep)
        f.truncate(keep)
