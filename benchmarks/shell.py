"""The session's shell and background processes.

- `shell_overhead`: what keeping the shell's state (`talaria.tools.shell`: a prologue sourced
  through `$BASH_ENV`, an EXIT trap saving the directory and exports, the state file read back)
  adds to a command over a fresh `bash -c` without it: `true` through `LocalWorkspace.run`,
  interleaved runs, medians, unsandboxed and on each sandbox tier here. Target ≤ 5 ms.
- `background_start`: `terminal(background=true)` returning its id, and a server started so
  answering its first request.
"""

from __future__ import annotations

import socket
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio

from benchmarks.env_sshd import free_port
from talaria.agent.tool_runner import invoke
from talaria.tools.builtin import load_builtin_tools
from talaria.tools.context import ToolContext
from talaria.tools.local.workspace import LocalWorkspace
from talaria.tools.sandbox import tiers
from talaria.tools.sandbox.tiers import command_spec
from talaria.tools.shell import ShellState
from talaria.tools.state import ToolState

RUNS = 200


def shell_overhead() -> Iterator[dict[str, Any]]:
    available = [None, *[t for t in ("bubblewrap", "landlock")
                         if (t == "bubblewrap" and tiers._bwrap_works())
                         or (t == "landlock" and tiers.landlock_abi() >= 1)]]
    for tier in available:
        fresh, kept = anyio.run(_overhead, tier)
        yield {"metric": "shell_state_overhead_ms", "sandbox": tier or "none", "runs": RUNS,
               "fresh_median_ms": round(statistics.median(fresh) * 1000, 2),
               "with_state_median_ms": round(statistics.median(kept) * 1000, 2),
               "overhead_ms": round((statistics.median(kept) - statistics.median(fresh)) * 1000, 2),
               "target_ms": 5}


async def _overhead(tier: str | None) -> tuple[list[float], list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ws = LocalWorkspace(root)
        sandbox = command_spec((root,), tier=tier) if tier else None
        shell = ShellState()
        # A session's shell after a few commands: a cd and some exports to restore.
        await ws.run("mkdir -p sub", cwd=root, timeout=30, output_limit=1000)
        first = await ws.run("cd sub; export A=1 B='two words' PATH=$PATH:/opt/x", cwd=root,
                             timeout=30, output_limit=1000, shell=shell.prologue(), sandbox=sandbox)
        shell.absorb(first.state, (root,), start=first.state_start)
        fresh: list[float] = []
        kept: list[float] = []
        for _ in range(RUNS):
            started = time.perf_counter()
            await ws.run("true", cwd=root, timeout=30, output_limit=1000, sandbox=sandbox)
            fresh.append(time.perf_counter() - started)
            started = time.perf_counter()
            result = await ws.run("true", cwd=shell.cwd or root, timeout=30, output_limit=1000,
                                  shell=shell.prologue(), sandbox=sandbox)
            shell.absorb(result.state, (root,), start=result.state_start)
            kept.append(time.perf_counter() - started)
        assert shell.cwd == root / "sub" and shell.exports["A"] == "1"
        return fresh, kept


def background_start() -> Iterator[dict[str, Any]]:
    returned, answered = anyio.run(_background)
    yield {"metric": "background_start_ms", "runs": len(returned),
           "returned_median_ms": round(statistics.median(returned) * 1000, 2),
           "server_answers_median_ms": round(statistics.median(answered) * 1000, 1)}


async def _background() -> tuple[list[float], list[float]]:
    registry = load_builtin_tools()
    terminal, process = registry.get("terminal"), registry.get("process")
    assert terminal is not None and process is not None
    returned: list[float] = []
    answered: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        state = ToolState()
        ctx = ToolContext(workspace=LocalWorkspace(Path(tmp)), state=state)
        for _ in range(10):
            port = free_port()
            started = time.perf_counter()
            out = await invoke(terminal, {"command": f"python3 -m http.server {port} --bind 127.0.0.1",
                                          "background": True}, ctx)
            returned.append(time.perf_counter() - started)
            while not answers(port):
                await anyio.sleep(0.005)
            answered.append(time.perf_counter() - started)
            await invoke(process, {"action": "kill", "session_id": out["session_id"]}, ctx)
        state.close()
    return returned, answered


def answers(port: int) -> bool:
    """Something listens on 127.0.0.1:`port`."""
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


BENCHMARKS = {"shell": shell_overhead, "background": background_start}
