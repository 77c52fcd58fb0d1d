"""Kernel lifetime: timeout, cancellation, idle reaping, LRU eviction, session close, and the
parent-death watchdog. Every check looks for live processes, never just at return values."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest

from talaria.agent.loop import run_turn
from talaria.tools.execute_code.env import ExecSettings
from talaria.tools.execute_code.kernel import Kernel, fingerprint
from talaria.tools.execute_code.pool import KernelPool
from talaria.tools.sandbox.tiers import detect_tier, landlock_abi
from tests import ROOT
from tests.exec_helpers import configure, execute, kernel_tag, tagged, wait_for, wait_gone
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
    configure(session, timeout=0.5)
    execute(session, "x = 1")
    tag = kernel_tag(session)
    started = time.monotonic()
    result = execute(session, SPAWN_AND_HANG.format(before=""))
    assert time.monotonic() - started < 2.5
    assert result["status"] == "timeout" and result["exit_code"] is None
    assert result["output"] == "started\n"  # what it printed before is kept
    assert "Timed out after 0.5 s" in result["error"] and "fresh" in result["error"]
    assert wait_gone(tag), "the kernel and its `sleep` child are gone"
    after = execute(session, "print('x' in globals())")
    assert after["output"] == "False\n" and after["kernel"] == "new"


def test_timeout_escalates_to_sigkill(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    configure(session, timeout=0.3, kill_grace=0.3)
    execute(session, "pass")
    tag = kernel_tag(session)
    ignore = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)"
    result = execute(session, ignore + "\nwhile True: pass")
    assert result["status"] == "timeout"
    assert wait_gone(tag, 1.0)


def test_cancel_kills_the_script_within_a_second(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    # The project is read-only to scripts: this one says "started" in its scratch dir.
    code = SPAWN_AND_HANG.format(before="open(os.environ['TMPDIR'] + '/started', 'w').close()")
    fake_llm.script([{"tool_calls": [{"name": "execute_code", "arguments": {"code": "import os\n" + code}}]}])
    events = recorded(session)
    tags: list[str] = []

    async def main() -> tuple[str, float]:
        result: list[str] = []
        async with anyio.create_task_group() as tg:
            async def turn() -> None:
                result.append(await run_turn(session, "run it"))

            tg.start_soon(turn)
            with anyio.fail_after(10):
                while not any((tmp_path / ".home").glob("cache/exec/talaria-kernel-*/started")):
                    await anyio.sleep(0.01)
            tags.append(kernel_tag(session))
            began = time.monotonic()
            assert session.cancel()
        return result[0], time.monotonic() - began

    reason, took = anyio.run(main)
    assert reason == "cancelled" and took < 1.0
    assert wait_gone(tags[0], 0.5)
    assert_pairs_complete(session.messages)
    assert [f.status for f in events.of("ToolCallFinished")] == ["failed"]
    again = execute(session, "print(1)")
    assert again["kernel"] == ("new: the previous one ended because it was killed when a turn "
                               "was cancelled")


def test_idle_kernels_are_reaped(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    configure(session, idle_s=0.4)
    execute(session, "x = 1")
    tag = kernel_tag(session)
    assert wait_gone(tag, 2.0), "the kernel exits by itself after idle_s"
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
            tags.append(kernel.tag)
        _, fresh, ended = await pool.acquire("b", fp, lambda: Kernel.start(settings, tmp_path, ""))
        assert fresh and "at most 2 kernels" in (ended or "")
        return tags

    tags = anyio.run(main)
    try:
        assert tags[0] == tags[2]
        assert wait_gone(tags[1], 1.0)
        assert tagged(tags[0]) == [] and tagged(tags[3])  # "a" made way for "b" again
        assert len(pool.kernels) == 2
    finally:
        pool.close()
    assert wait_gone(tags[3], 1.0)


def test_closing_the_session_stops_its_kernel(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    execute(session, "pass")
    tag = kernel_tag(session)
    assert tagged(tag)
    session.close()
    assert wait_gone(tag, 1.0)


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
        assert wait_gone(tag, 2.0), "the kernel, its child included"
    finally:
        parent.kill()
        parent.wait()
