"""`batch/cpu.py`: a process tree's load, as the local pool reads it to decide whether to
grow: a busy grandchild counts (its time, and as runnable), and its time stays counted once it
ends and is reaped."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from talaria.agent.trajectories.batch import cpu

BUSY = "import time; [0 for _ in iter(lambda: time.process_time() < {s}, False)]"
"""Spins until it has had `s` CPU seconds, however loaded the machine is."""


def _parent_of_a_busy_child(seconds: float) -> subprocess.Popen[bytes]:
    """A process whose child spins for `seconds` of CPU, is reaped, and then the parent sleeps."""
    code = (f"import subprocess, sys, time; subprocess.run([sys.executable, '-c', {BUSY.format(s=seconds)!r}]); "
            "time.sleep(30)")
    return subprocess.Popen([sys.executable, "-c", code])


def test_a_busy_grandchild_counts_and_stays_counted_once_reaped() -> None:
    parent = _parent_of_a_busy_child(0.8)
    try:
        time.sleep(0.3)
        during = cpu.tree_load({parent.pid})
        assert during is not None and during.runnable == 1  # the child spins (or waits for a core)
        deadline = time.monotonic() + 20
        while (after := cpu.tree_load({parent.pid})) is not None and after.runnable:
            assert time.monotonic() < deadline, after
            time.sleep(0.1)  # until the child has ended and been reaped
        assert after is not None and after.cpu_s >= 0.75, after  # its time kept by the parent
        assert after.cpu_s - during.cpu_s >= 0.4, (during, after)
        by_parents = cpu._by_parents({parent.pid}, os.sysconf("SC_CLK_TCK"))
        assert abs(by_parents.cpu_s - after.cpu_s) < 0.1 and by_parents.runnable == 0
    finally:
        parent.kill()
        parent.wait()


def test_processes_that_are_gone_count_nothing() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert cpu.tree_load({gone.pid}) == cpu.TreeLoad(0.0, 0)
