"""Helpers for the execute_code tests: run it like the loop does, find a kernel's processes."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import anyio

from talaria.agent.session import Session
from talaria.agent.tool_runner import call_nested
from tests import processes
from tests.helpers import Recorder


def configure(session: Session, **limits: Any) -> None:
    """Small limits for a test: `timeout=1, stdout_limit=1000, max_tool_calls=3`..."""
    state = session.tool_state
    state.exec_settings = replace(state.exec_settings, **limits)


def execute(session: Session, code: str, events: Recorder | None = None, **args: Any) -> dict[str, Any]:
    """One execute_code call dispatched like a model's (plan, permission, handler, cards).
    Its events go to the session's door (`tests.helpers.recorded(session)`)."""
    return anyio.run(call_nested, session, "execute_code", {"code": code, **args})


def tagged(tag: str) -> list[int]:
    """Live (non-zombie) processes whose command line holds `tag`: the kernel and, inside
    bubblewrap, its wrapper. This container's init does not reap, so zombies are skipped."""
    pids = []
    for proc in processes():
        try:
            cmdline = (proc / "cmdline").read_bytes()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if tag.encode() in cmdline and state not in ("Z", "X"):
            pids.append(int(proc.name))
    return pids


def kernel_tag(session: Session) -> str:
    """The tag of the session's live kernel (run a script first)."""
    slot = session.tool_state.kernel
    assert slot is not None, "the session has no kernel slot"
    kernel = slot.pool.kernels.get(slot.key)
    assert kernel is not None, "the session has no live kernel"
    return kernel.tag


PATIENCE_S = 30.0
"""How long a wait may last before a test fails: generous, for a loaded 2-core machine. It is
never a claim about speed (those are in benchmarks/); the waits end as soon as they can."""


def wait_for(predicate: Callable[[], Any], seconds: float = PATIENCE_S) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def wait_gone(tag: str, seconds: float = PATIENCE_S) -> bool:
    """Whether every process tagged `tag` (or `tag` + a suffix) is gone within `seconds`."""
    return wait_for(lambda: not tagged(tag), seconds)


def output_json(result: dict[str, Any]) -> Any:
    return json.loads(result["output"])
