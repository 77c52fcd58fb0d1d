"""CPU use of process trees, from /proc: whether the batch workers keep the cores busy.

A local batch adds worker processes past one per core only while the ones it has leave the
cores idle (`executors.LocalExecutor`): jobs waiting on a model do; jobs running tests or
builds in the workers' children do not, and more processes would only take turns on the
cores. Two signs, as neither alone holds on a machine others load too: the CPU time the tree
used (a busy tree that others crowd gets less of it), and its threads that are runnable now
(running or waiting for a core; a tree that waits on a model has none).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True, slots=True)
class TreeLoad:
    cpu_s: float
    """User + system CPU seconds of the live processes and of the children they reaped."""
    runnable: int
    """Threads running or waiting for a core, now."""


def tree_load(roots: set[int]) -> TreeLoad | None:
    """The load of `roots` and every live process below them; None where there is no /proc
    to read (macOS). Follows each thread's `children` list (a few reads per process, not all
    of /proc); where the kernel has none, reads every process's parent."""
    if not PROC.is_dir():
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    if not _children_listed():
        return _by_parents(roots, ticks)
    total, runnable, seen, todo = 0, 0, set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            total += _times(_fields((PROC / str(pid) / "stat").read_text()))
            for task in (PROC / str(pid) / "task").iterdir():
                runnable += _fields((task / "stat").read_text())[0] == "R"
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):  # the process or the thread ended since
            continue
    return TreeLoad(total / ticks, runnable)


def _fields(stat: str) -> list[str]:
    """A `stat` line's fields after the command name (which may hold spaces): state first."""
    return stat[stat.rindex(")") + 2:].split()


def _times(fields: list[str]) -> int:
    """utime + stime + cutime + cstime (clock ticks): a child's time moves to its parent's
    c-times when it is reaped, so a tree's sum does not drop when a busy child ends."""
    return sum(int(fields[n]) for n in (11, 12, 13, 14))


@cache
def _children_listed() -> bool:
    """Whether the kernel lists a thread's children (CONFIG_PROC_CHILDREN)."""
    return (PROC / "self" / "task" / str(threading.get_native_id()) / "children").exists()


def _by_parents(roots: set[int], ticks: int) -> TreeLoad:
    """`tree_load` from every process's parent (its runnable count by process, not thread)."""
    stats: dict[int, tuple[int, int, bool]] = {}
    for entry in os.listdir(PROC):
        if entry.isdigit():
            try:
                fields = _fields((PROC / entry / "stat").read_text())
            except OSError:
                continue
            stats[int(entry)] = (int(fields[1]), _times(fields), fields[0] == "R")
    found = roots & set(stats)
    grew = found
    while grew:
        grew = {pid for pid, (parent, _, _) in stats.items() if parent in grew} - found
        found |= grew
    return TreeLoad(sum(stats[pid][1] for pid in found) / ticks,
                    sum(stats[pid][2] for pid in found))
