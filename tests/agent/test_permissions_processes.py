"""A mode switch holds for what is already running, and input to a process is judged by how
that process runs. Real processes, the real sandbox, on every tier this machine has:

- a shell the user allowed (unconfined) takes no input in plan mode (the same turn's
  `terminal` is refused too), none in dont_ask unless that input was approved, and asks in auto;
- a shell started unseen in the sandbox takes input without a question in auto, and that
  input stays in its sandbox: a path whose edit was rejected stays unchanged;
- a path rejected after such a shell started makes its input ask;
- an execute_code script's next write is refused once the session switches to plan;
- a subagent already running follows its parent into plan mode.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from talaria.agent.loop import run_turn
from talaria.agent.permissions import PLAN_REFUSAL, PermissionAsk
from talaria.agent.session import Session
from talaria.agent.tool_runner import call_nested
from tests.agent.test_permission_table import CONFINING, TIERS
from tests.exec_helpers import PATIENCE_S, configure
from tests.helpers import make_session

SHELL = "sh -c 'while read l; do eval \"$l\"; done'"
PWNED = "echo pwned > hello.txt"


class Asker:
    """Answers `answer`; `then` runs at each question (e.g. the user switches the mode)."""

    def __init__(self, answer: str = "allow_once",
                 then: Callable[[PermissionAsk], None] | None = None) -> None:
        self.answer = answer
        self.then = then
        self.asked: list[PermissionAsk] = []

    async def __call__(self, ask: PermissionAsk) -> str:
        self.asked.append(ask)
        if self.then is not None:
            self.then(ask)
        return self.answer


def session_on(fake_llm: Any, tmp_path: Path, tier: str, mode: str, asker: Asker) -> Session:
    session = make_session(fake_llm, tmp_path, mode=mode, asker=asker)
    session.permissions.asker = asker
    session.permissions.sandbox_tier = tier
    configure(session, tier=tier)
    (session.cwd / "hello.txt").write_text("hello\n")
    return session


async def until(predicate: Callable[[], bool]) -> None:
    with anyio.fail_after(PATIENCE_S):
        while not predicate():
            await anyio.sleep(0.02)


async def shell(session: Session) -> str:
    started = await call_nested(session, "terminal", {"command": SHELL, "background": True})
    assert started.get("status") == "running", started
    return str(started["session_id"])


def submit(session: Session, proc: str, data: str) -> Awaitable[dict[str, Any]]:
    return call_nested(session, "process", {"action": "submit", "session_id": proc, "data": data})


@pytest.mark.parametrize("tier", TIERS)
def test_plan_mode_refuses_input_to_a_shell_the_user_allowed(fake_llm: Any, tmp_path: Path,
                                                              tier: str) -> None:
    asker = Asker("allow_once")
    session = session_on(fake_llm, tmp_path, tier, "default", asker)
    hello = session.cwd / "hello.txt"

    async def body() -> None:
        proc = await shell(session)  # asked and allowed: it runs unconfined
        assert len(asker.asked) == 1 and not session.tool_state.processes.get(proc).confined  # type: ignore[union-attr]
        session.permissions.mode = "plan"
        for action in ("submit", "write"):
            refused = await call_nested(session, "process", {
                "action": action, "session_id": proc, "data": PWNED + "\n"})
            assert refused["rejected"] and refused["error"] == PLAN_REFUSAL, refused
        terminal = await call_nested(session, "terminal", {"command": PWNED})
        assert terminal["error"] == PLAN_REFUSAL
        for action in ("close", "kill"):
            stopped = await call_nested(session, "process", {"action": action, "session_id": proc})
            assert stopped["error"] == PLAN_REFUSAL
        polled = await call_nested(session, "process", {"action": "poll", "session_id": proc})
        assert polled["status"] == "running"  # it keeps running; reading it is a read
        assert len(asker.asked) == 1  # plan refuses without asking

        session.permissions.mode = "dont_ask"  # refuses what it would refuse to start
        assert "dont_ask" in (await submit(session, proc, PWNED))["error"]
        session.permissions.mode = "auto"  # unconfined input: auto asks (the user says no)
        asker.answer = "reject_once"
        assert (await submit(session, proc, PWNED))["rejected"] and len(asker.asked) == 2
        assert "outside the sandbox" in asker.asked[-1].reason
        assert asker.asked[-1].kind == "execute" and PWNED in asker.asked[-1].title
        await anyio.sleep(0.2)
        assert hello.read_text() == "hello\n"

        session.permissions.mode = "default"  # the user allows it, always: it runs
        asker.answer = "allow_always"
        assert (await submit(session, proc, PWNED))["status"] == "ok"
        await until(lambda: hello.read_text() == "pwned\n")
        hello.write_text("hello\n")
        session.permissions.mode = "dont_ask"  # approved before: dont_ask lets exactly it in
        assert (await submit(session, proc, PWNED))["status"] == "ok"
        await until(lambda: hello.read_text() == "pwned\n")
        other = await submit(session, proc, "echo other > hello.txt")
        assert "dont_ask" in other["error"]
        assert len(asker.asked) == 3

    try:
        anyio.run(body)
    finally:
        session.close()


@pytest.mark.parametrize("tier", TIERS)
def test_input_to_a_sandboxed_shell_stays_in_its_sandbox(fake_llm: Any, tmp_path: Path,
                                                         tier: str) -> None:
    asker = Asker("reject_once")
    session = session_on(fake_llm, tmp_path, tier, "default", asker)
    env = session.cwd / ".env"
    env.write_text("SECRET=1\n")
    out = session.cwd / "out"  # Landlock: the project root takes no new entries beside .env
    out.mkdir()

    async def body() -> None:
        assert (await call_nested(session, "write_file", {"path": ".env", "content": "X"}))["rejected"]
        session.permissions.mode = "auto"
        asker.answer = "allow_once"  # where no sandbox holds, the user is asked and allows
        proc = await shell(session)
        entry = session.tool_state.processes.get(proc)  # type: ignore[union-attr]
        assert entry.confined == (tier in CONFINING)
        asked = len(asker.asked)
        assert (await submit(session, proc, "echo ok > out/ok.txt"))["status"] == "ok"
        await until(lambda: (out / "ok.txt").exists())
        if tier not in CONFINING:  # it runs as the user saw it: each input asks
            assert len(asker.asked) == asked + 1 and "outside the sandbox" in asker.asked[-1].reason
            return
        assert len(asker.asked) == asked  # no question: it stays in its sandbox
        for walkaround in ("f=.en; cp out/ok.txt ${f}v", "f=.en; mv out/ok.txt ${f}v",
                           "python3 -c \"open('.e'+'nv','w').write('X')\"",
                           "f=.en; echo X > ${f}v", "echo done > out/done"):
            assert (await submit(session, proc, walkaround))["status"] == "ok"
        await until(lambda: (out / "done").exists())  # the shell read every line
        assert env.read_text() == "SECRET=1\n" and len(asker.asked) == asked

        # A path rejected after the shell started is not read-only in its sandbox: input asks.
        (session.cwd / "late.txt").write_text("late\n")
        session.permissions.mode = "default"
        asker.answer = "reject_once"
        assert (await call_nested(session, "write_file", {"path": "late.txt", "content": "X"}))["rejected"]
        session.permissions.mode = "auto"
        refused = await submit(session, proc, "echo ok >> out/ok.txt")
        assert refused["rejected"] and "after" in asker.asked[-1].reason, asker.asked[-1]
        assert (session.cwd / "late.txt").read_text() == "late\n"

    try:
        anyio.run(body)
    finally:
        session.close()


@pytest.mark.parametrize("tier", TIERS)
def test_a_switch_to_plan_refuses_a_running_scripts_next_write(fake_llm: Any, tmp_path: Path,
                                                              tier: str) -> None:
    asker = Asker("allow_once")  # where auto asks for the script (no sandbox), it is allowed
    session = session_on(fake_llm, tmp_path, tier, "auto", asker)
    recorder = session.door.on_event  # type: ignore[attr-defined]

    async def switch(event: Any) -> None:  # the user picks plan once the first write is done
        await recorder(event)
        if type(event).__name__ == "ToolCallFinished" and (session.cwd / "one.txt").exists():
            session.permissions.mode = "plan"

    session.door.on_event = switch  # type: ignore[attr-defined]
    code = ("from hermes_tools import write_file, terminal\n"
            "print(write_file(path='one.txt', content='1'))\n"
            "print(write_file(path='two.txt', content='2'))\n"
            "print(terminal(command='echo 3 > three.txt'))\n")
    try:
        result = anyio.run(call_nested, session, "execute_code", {"code": code})
    finally:
        session.close()
    assert result["status"] == "success", result
    assert (session.cwd / "one.txt").read_text() == "1"
    assert not (session.cwd / "two.txt").exists() and not (session.cwd / "three.txt").exists()
    assert result["output"].count("Plan mode is read-only") == 2, result["output"]


def test_a_running_subagent_follows_its_parent_into_plan_mode(fake_llm: Any, tmp_path: Path) -> None:
    def to_plan(ask: PermissionAsk) -> None:  # the user allows the first edit, then picks plan
        session.permissions.mode = "plan"

    asker = Asker("allow_once", then=to_plan)
    session = make_session(fake_llm, tmp_path, mode="default", asker=asker)
    session.permissions.asker = asker
    fake_llm.script([
        {"tool_calls": [{"id": "d1", "name": "delegate_task", "arguments": {"goal": "write"}}]},
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "a"}}]},
        {"tool_calls": [{"id": "w2", "name": "write_file", "arguments": {"path": "b.txt", "content": "b"}}]},
        {"text": "Wrote what I could."},
        {"text": "Done."},
    ])
    try:
        assert anyio.run(run_turn, session, "go") == "end_turn"
    finally:
        session.close()
    assert (session.cwd / "a.txt").read_text() == "a"
    assert not (session.cwd / "b.txt").exists()
    assert len(asker.asked) == 1 and asker.asked[0].title.startswith("Subagent 1: ")
    child = next(m for m in session.messages if m.get("name") == "delegate_task")["subagents"][0]
    refused = next(m for m in child["messages"] if m.get("tool_call_id") == "w2")
    assert PLAN_REFUSAL in refused["content"]
