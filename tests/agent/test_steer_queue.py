"""Prompts during a turn at the agent level: the queue's order and `/queue`, `/steer` notes
reaching the very next model call, never between a call and its result, never lost."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from talaria.agent import commands
from talaria.agent.loop import STEER_PREFIX, run_turn
from talaria.agent.queue import PREVIEW_CHARS, PromptQueue
from tests.helpers import assert_pairs_complete, make_session, recorded


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def test_prompts_wait_in_arrival_order_and_clear_drops_the_waiting() -> None:
    queue = PromptQueue()
    log: list[str] = []

    async def prompt(text: str, hold: anyio.Event | None = None) -> None:
        async with queue.turn(text) as admitted:
            log.append(f"{text}:{'ran' if admitted else 'dropped'}")
            if hold is not None:
                await hold.wait()

    async def main() -> None:
        hold = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(prompt, "first", hold)
            await anyio.wait_all_tasks_blocked()
            for text in ("second", "third"):
                tg.start_soon(prompt, text)
                await anyio.wait_all_tasks_blocked()
            assert [w.text for w in queue.waiting] == ["second", "third"]
            hold.set()
        assert log == ["first:ran", "second:ran", "third:ran"] and not queue.busy
        log.clear()
        hold = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(prompt, "running", hold)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(prompt, "waiting")
            await anyio.wait_all_tasks_blocked()
            assert queue.clear() == 1
            await anyio.wait_all_tasks_blocked()
            hold.set()
        assert log == ["running:ran", "waiting:dropped"] and not queue.busy

    anyio.run(main)


def test_a_waiter_cancelled_while_waiting_leaves_the_queue_in_order() -> None:
    queue = PromptQueue()
    ran: list[str] = []

    async def prompt(text: str, hold: anyio.Event | None = None) -> None:
        async with queue.turn(text):
            ran.append(text)
            if hold is not None:
                await hold.wait()

    async def main() -> None:
        hold = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(prompt, "a", hold)
            await anyio.wait_all_tasks_blocked()
            with anyio.CancelScope() as scope:
                tg.start_soon(prompt, "c")  # stays
                await anyio.wait_all_tasks_blocked()
            async with anyio.create_task_group() as inner:
                inner.start_soon(prompt, "b")
                await anyio.wait_all_tasks_blocked()
                inner.cancel_scope.cancel()  # b's request was cancelled while it waited
            assert [w.text for w in queue.waiting] == ["c"]
            hold.set()
        assert ran == ["a", "c"] and not queue.busy and not scope.cancel_called

    anyio.run(main)


def test_queue_command_lists_previews_and_clear(tmp_path: Path, fake_llm) -> None:
    session = make_session(fake_llm, tmp_path)
    long = "x" * (PREVIEW_CHARS * 2)

    async def main() -> tuple[str, str, str]:
        async with anyio.create_task_group() as tg:
            hold = anyio.Event()

            async def prompt(text: str) -> None:
                async with session.prompts.turn(text):
                    await hold.wait()

            for text in ("running", "fix   the\ntests", long):
                tg.start_soon(prompt, text)
                await anyio.wait_all_tasks_blocked()
            listed = await commands._dispatch(session, None, "queue", "")  # type: ignore[arg-type]
            cleared = await commands._dispatch(session, None, "queue", "clear")  # type: ignore[arg-type]
            empty = await commands._dispatch(session, None, "queue", "")  # type: ignore[arg-type]
            hold.set()
        return listed, cleared, empty

    listed, cleared, empty = anyio.run(main)
    assert "2 prompt(s) waiting" in listed and "1. fix the tests" in listed
    assert f"2. {'x' * (PREVIEW_CHARS - 1)}…" in listed
    assert cleared == "Dropped 2 waiting prompt(s)." and empty == "No prompts are waiting."
    with pytest.raises(commands.CommandError, match="no argument but `clear`"):
        anyio.run(commands._dispatch, session, None, "queue", "everything")


def test_steer_during_a_five_tool_turn_reaches_the_very_next_model_request(
        tmp_path: Path, fake_llm) -> None:
    """The note is sent while the third tool call runs; the fourth model request (the first
    after it) carries it, after that call's result, and it stays in the transcript."""
    session = make_session(fake_llm, tmp_path)
    project = session.cwd
    steps = [{"tool_calls": [call("terminal", command=f"sleep 0.3; echo step{i}")]}
             for i in range(5)]
    fake_llm.script([*steps, {"text": "Done."}])
    note = "use tabs, not spaces"

    async def main() -> str:
        async with anyio.create_task_group() as tg:
            result: list[str] = []

            async def turn() -> None:
                result.append(await run_turn(session, "five steps"))

            tg.start_soon(turn)
            while len(fake_llm.requests) < 3:  # the third model call asked for step2
                await anyio.sleep(0.01)
            await commands.run(session, None, "steer", note)  # type: ignore[arg-type]
            sent_during = len(fake_llm.requests)
        assert sent_during == 3
        return result[0]

    assert anyio.run(main) == "end_turn"
    bodies = [r["json"]["messages"] for r in fake_llm.requests]
    notes = [[m for m in body if m["role"] == "user" and note in str(m["content"])] for body in bodies]
    assert [bool(n) for n in notes] == [False, False, False, True, True, True]
    fourth = bodies[3]
    assert fourth[-1]["role"] == "user" and fourth[-1]["content"] == STEER_PREFIX + note
    assert fourth[-2]["role"] == "tool"  # never between a call and its result
    assert_pairs_complete(session.messages)
    assert (project / "step0").exists() is False  # the commands only echoed
    steered = [m for m in session.messages if m.get("steer")]
    assert len(steered) == 1
    assert [e for e in recorded(session).of("Notice") if "Steering" in e.text]


def test_a_note_sent_as_the_model_answers_is_read_before_the_turn_ends(
        tmp_path: Path, fake_llm) -> None:
    session = make_session(fake_llm, tmp_path)
    fake_llm.script([{"text": "Finished.", "delay": 0.4}, {"text": "Adjusted."}])

    async def main() -> str:
        async with anyio.create_task_group() as tg:
            out: list[str] = []

            async def turn() -> None:
                out.append(await run_turn(session, "go"))

            tg.start_soon(turn)
            while not fake_llm.requests:
                await anyio.sleep(0.01)
            session.steer_notes.append("also update the changelog")
        return out[0]

    assert anyio.run(main) == "end_turn"
    assert len(fake_llm.requests) == 2  # the note was not lost when the answer had no tools
    assert "also update the changelog" in str(fake_llm.requests[1]["json"]["messages"][-1])


def test_steer_with_no_running_turn_is_refused_and_changes_nothing(tmp_path: Path, fake_llm) -> None:
    session = make_session(fake_llm, tmp_path)
    with pytest.raises(commands.CommandError, match="no turn is running"):
        anyio.run(commands._dispatch, session, None, "steer", "hello")
    with pytest.raises(commands.CommandError, match="needs a note"):
        anyio.run(commands._dispatch, session, None, "steer", "")
    assert session.steer_notes == [] and len(session.messages) == 1


def test_notes_left_by_a_turn_that_stopped_early_join_the_next_one(tmp_path: Path, fake_llm) -> None:
    """A turn that ends at its limit while a note waits keeps the note for the next turn."""
    session = make_session(fake_llm, tmp_path, max_turns=1)
    fake_llm.script([{"tool_calls": [call("todo")]}, {"text": "ok"}])

    async def first() -> str:
        async with anyio.create_task_group() as tg:
            out: list[str] = []

            async def turn() -> None:
                out.append(await run_turn(session, "first"))

            tg.start_soon(turn)
            while not fake_llm.requests:
                await anyio.sleep(0.01)
            session.steer_notes.append("left over")  # after the turn's only model call
        return out[0]

    assert anyio.run(first) == "max_turn_requests"
    assert session.steer_notes == ["left over"]
    assert anyio.run(run_turn, session, "second") == "end_turn"
    assert session.steer_notes == []
    assert "left over" in str(fake_llm.requests[1]["json"]["messages"][-1])
