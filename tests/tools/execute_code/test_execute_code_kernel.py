"""Kernel lifetime: timeout, cancellation, idle reaping, LRU eviction, session close, prestart,
and the parent-death watchdog. Every check looks for live processes, never just at return
values. Short limits (timeouts, idle) are set only after a first script has started the
kernel, so a slow start on a loaded machine never counts against them; waits are generous
(tests.exec_helpers.PATIENCE_S) and latency is measured in benchmarks/execute_code.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from talaria.agent.loop import run_turn
from talaria.tools.execute_code.env import ExecSettings
from talaria.tools.execute_code.kernel import Kernel, fingerprint
from talaria.tools.execute_code.pool import KernelPool
from talaria.tools.sandbox.tiers import detect_tier, landlock_abi
from tests import ROOT
from tests.exec_helpers import (
    PATIENCE_S,
    configure,
    execute,
    kernel_tag,
    tagged,
    wait_for,
    wait_gone,
)
from tests.helpers import assert_pairs_complete, make_session, recorded

TIERS = sorted({detect_tier(), "rlimits"} | ({"landlock"} if landlock_abi() >= 1 else set()))

SPAWN_AND_HANG = textwrap.dedent("""\
    import subprocess, time
    child = subprocess.Popen(["sleep", "60"])
    print("started", flush=True)
    {before}
    time.sleep(60)
""")


def test_timeout_kills_the_whole_group_and_says_so(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    execute(session, "x = 1")
    configure(session, timeout=0.5)
    tag = kernel_tag(session)
    result = execute(session, SPAWN_AND_HANG.format(before=""))
    assert result["status"] == "timeout" and result["exit_code"] is None
    assert result["output"] == "started\n"  # what it printed before is kept
    assert "Timed out after 0.5 s" in result["error"] and "fresh" in result["error"]
    assert wait_gone(tag), "the kernel and its `sleep` child are gone"
    replacement = kernel_tag(session)  # started at once, before the next call
    assert replacement != tag and tagged(replacement)
    configure(session, timeout=300)
    after = execute(session, "print('x' in globals())")
    assert after["output"] == "False\n" and after["kernel"] == "new"
    assert kernel_tag(session) == replacement


def test_timeout_escalates_to_sigkill(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    execute(session, "pass")
    configure(session, timeout=0.3, kill_grace=0.3)
    tag = kernel_tag(session)
    ignore = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)"
    result = execute(session, ignore + "\nwhile True: pass")
    assert result["status"] == "timeout"
    assert wait_gone(tag)


def test_cancel_kills_the_script_and_its_children(fake_llm, tmp_path: Path) -> None:
    """Cancelling the turn mid-script ends the turn as cancelled and kills the kernel's whole
    group (how fast: benchmarks/execute_code.py, cancel_latency)."""
    session = make_session(fake_llm, tmp_path)
    # The script tells the agent it runs through a tool call (a nested card), then hangs.
    code = SPAWN_AND_HANG.format(before="from hermes_tools import read_file; read_file('x')")
    fake_llm.script([{"tool_calls": [{"name": "execute_code", "arguments": {"code": code}}]}])
    events = recorded(session)
    tags: list[str] = []

    async def main() -> str:
        result: list[str] = []
        async with anyio.create_task_group() as tg:
            async def turn() -> None:
                result.append(await run_turn(session, "run it"))

            tg.start_soon(turn)
            with anyio.fail_after(PATIENCE_S):
                while not [e for e in events.of("ToolCallStarted") if e.name == "read_file"]:
                    await anyio.sleep(0.01)
            tags.append(kernel_tag(session))
            assert session.cancel()
        return result[0]

    assert anyio.run(main) == "cancelled"
    assert wait_gone(tags[0])
    assert_pairs_complete(session.messages)
    (card,) = [e.id for e in events.of("ToolCallStarted") if e.name == "execute_code"]
    assert [f.status for f in events.of("ToolCallFinished") if f.id == card] == ["failed"]
    again = execute(session, "print(1)")
    assert again["kernel"] == ("new: the previous one ended because it was killed when a turn "
                               "was cancelled")


def test_idle_kernels_are_reaped(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    configure(session, idle_s=0.4)
    execute(session, "x = 1")
    tag = kernel_tag(session)
    assert wait_gone(tag), "the kernel exits by itself after idle_s"
    result = execute(session, "print('x' in globals())")
    assert result["output"] == "False\n"
    assert result["kernel"] == "new: the previous one ended because it was idle for over 0.4 s"


def test_least_recently_used_kernel_is_evicted(tmp_path: Path) -> None:
    settings = ExecSettings(cache_dir=tmp_path / "cache")
    pool = KernelPool(max_live=2, idle_s=60)
    fp = fingerprint(settings, tmp_path, dict(os.environ))

    async def main() -> list[str]:
        tags = []
        for key in ("a", "b", "a", "c"):  # "b" is the least recently used when "c" starts
            kernel, _, _ = await pool.acquire(key, fp, lambda: Kernel.start(settings, tmp_path, ""))
            kernel.cells += 1  # as if a script ran: its end is worth telling
            tags.append(kernel.tag)
        _, fresh, ended = await pool.acquire("b", fp, lambda: Kernel.start(settings, tmp_path, ""))
        assert fresh and "at most 2 kernels" in (ended or "")
        return tags

    tags = anyio.run(main)
    try:
        assert tags[0] == tags[2]
        assert wait_gone(tags[1])
        assert wait_gone(tags[0]) and tagged(tags[3])  # "a" made way for "b" again
        assert len(pool.kernels) == 2
    finally:
        pool.close()
    assert wait_gone(tags[3])


def test_closing_the_session_stops_its_kernel(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    execute(session, "pass")
    tag = kernel_tag(session)
    assert tagged(tag)
    session.close()
    assert wait_gone(tag)


WATCHDOG_PARENT = textwrap.dedent("""\
    import sys, anyio
    from pathlib import Path
    from talaria.tools.execute_code.env import ExecSettings
    from talaria.tools.execute_code.kernel import Kernel

    CHILD = "import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', TAG])"

    async def main():
        settings = ExecSettings(cache_dir=Path(sys.argv[1]), tier=sys.argv[2])
        kernel = await Kernel.start(settings, Path.cwd(), "")
        async def dispatch(name, args):
            return {}
        await kernel.run(CHILD.replace("TAG", repr(kernel.tag + "-child")), settings, dispatch,
                         frozenset(), Path(sys.argv[1]) / "out")
        print(kernel.tag, flush=True)
        await anyio.sleep(60)

    anyio.run(main)
""")


@pytest.mark.parametrize("tier", TIERS)
def test_kernel_and_its_children_die_with_the_agent_even_on_kill_9(tmp_path: Path, tier: str) -> None:
    root = ROOT
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    parent = subprocess.Popen([sys.executable, "-c", WATCHDOG_PARENT, str(tmp_path), tier],
                              cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True)
    try:
        tag = parent.stdout.readline().strip()
        assert tag.startswith("talaria-kernel-") and tagged(tag)
        assert wait_for(lambda: tagged(tag + "-child")), "the script's child runs"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert wait_gone(tag), "the kernel, its child included"
    finally:
        parent.kill()
        parent.wait()
