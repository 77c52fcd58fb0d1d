"""Every row the agent writes is one of `agent/transcript.py`'s types: real turns (tools, a
steer, a process note, an interrupted answer and call, a secret read, a compaction, a restore
after a crash, Anthropic's thinking, an image a tool attached, subagents, a background review)
through the fake LLM, and every stored and live row checked against the TypedDicts: no key
they do not declare, every key they require, values of the declared kinds. A new key without
a type fails here."""

from __future__ import annotations

import types
from collections.abc import Callable
from pathlib import Path
from typing import (
    Any,
    Literal,
    NotRequired,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

import anyio

from benchmarks.synthetic import TemplateSummarizer
from talaria.agent import transcript as t
from talaria.agent.context.compaction import compact_session
from talaria.agent.loop import run_turn
from talaria.agent.runtime import Opening, new_session
from talaria.agent.session import Session
from talaria.agent.skills.review import after_turn
from talaria.agent.store import Store
from tests.agent.skills.test_review import SKILL, config_of
from tests.agent.test_recall_policy import Asker
from tests.agent.test_subagents import delegate, router, writes
from tests.agent.test_vision import look, png
from tests.helpers import make_session, recorded

ROWS: dict[str, Any] = {"system": t.SystemMessage, "user": t.UserMessage,
                        "assistant": t.AssistantMessage, "tool": t.ToolMessage}
EVENTS: dict[str, Any] = {"compaction": t.CompactionEvent, "review": t.ReviewEvent}
PARTS: dict[str, Any] = {"text": t.TextPart, "image": t.ImagePart}


def row_problems(row: Any, where: str = "row") -> list[str]:
    """What in `row` its TypedDict does not allow (nested rows too: parts, subagents' and a
    review's messages)."""
    if not isinstance(row, dict):
        return [f"{where}: not an object"]
    kind = EVENTS.get(row.get("type")) if row.get("role") == "event" else ROWS.get(row.get("role"))
    if kind is None:
        return [f"{where}: no type for role {row.get('role')!r} (type {row.get('type')!r})"]
    problems = _problems(row, kind, where)
    if isinstance(parts := row.get("content"), list) and row.get("role") == "user":
        for n, part in enumerate(parts):
            part_type = PARTS.get(part.get("type")) if isinstance(part, dict) else None
            problems += _problems(part, part_type, f"{where}.content[{n}]") if part_type \
                else [f"{where}.content[{n}]: not a text or image part"]
    nested = [*row.get("messages", ()), *(m for run in row.get("subagents", ()) for m in run["messages"])]
    for n, message in enumerate(nested):
        problems += row_problems(message, f"{where}.messages[{n}]")
    return problems


def _problems(value: Any, hint: Any, where: str) -> list[str]:
    origin, args = get_origin(hint), get_args(hint)
    if origin is NotRequired:
        return _problems(value, args[0], where)
    if is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{where}: not an object"]
        hints = get_type_hints(hint, include_extras=True)
        optional = set(hint.__optional_keys__) | {k for k, h in hints.items() if get_origin(h) is NotRequired}
        out = [f"{where}: key {k!r} is not declared by {hint.__name__}" for k in value if k not in hints]
        out += [f"{where}: {hint.__name__} requires {k!r}" for k in hints if k not in value and k not in optional]
        return out + [p for k in hints if k in value for p in _problems(value[k], hints[k], f"{where}.{k}")]
    if origin is Literal:
        return [] if value in args else [f"{where}: {value!r} is none of {args}"]
    if origin in (Union, types.UnionType):
        return [] if any(not _problems(value, a, where) for a in args) else [f"{where}: {value!r} is not {hint}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: not a list"]
        return [p for n, item in enumerate(value) for p in _problems(item, args[0], f"{where}[{n}]")]
    if origin is dict:
        return [] if isinstance(value, dict) else [f"{where}: not an object"]
    if hint is Any:
        return []
    if hint is type(None):
        return [] if value is None else [f"{where}: {value!r} is not None"]
    kinds = (int, float) if hint is float else hint
    ok = isinstance(value, kinds) and not (hint in (int, float) and isinstance(value, bool))
    return [] if ok else [f"{where}: {value!r} is not {hint.__name__}"]


def assert_typed(rows: list[Any]) -> None:
    problems = [p for n, row in enumerate(rows) for p in row_problems(row, f"row {n}")]
    assert not problems, "\n".join(problems)


def written(store: Store, session: Session) -> list[Any]:
    """The rows as stored (the transcript, the live context's snapshot) and as live."""
    return [*store.messages(session.id), *store.context(session.id), *session.messages]


def test_the_checker_fails_on_an_undeclared_or_missing_key_and_a_wrong_value() -> None:
    good = {"role": "tool", "tool_call_id": "c1", "name": "read_file", "content": "{}",
            "status": "completed", "display": []}
    assert row_problems(good) == []
    assert row_problems({**good, "elapsed": 3}) == ["row: key 'elapsed' is not declared by ToolMessage"]
    assert row_problems({k: v for k, v in good.items() if k != "status"}) == \
        ["row: ToolMessage requires 'status'"]
    assert row_problems({**good, "status": "done"})[0].startswith("row.status: 'done' is none of")
    assert row_problems({"role": "assistant", "content": "x", "usage": {"input_tokens": 1}}) != []
    assert row_problems({"role": "user", "content": [{"type": "video"}]}) != []
    assert row_problems({"role": "event", "type": "hint"}) != []
    nested = {**good, "subagents": [{"task": 1, "goal": "g", "status": "completed",
                                     "session_id": None, "messages": [{"role": "user", "content": "x", "x": 1}]}]}
    assert row_problems(nested) == ["row.messages[0]: key 'x' is not declared by UserMessage"]


def _cancel_when(session: Session, prompt: str, ready: Callable[[], bool]) -> str:
    """Run a turn and cancel it once `ready()`."""
    async def main() -> str:
        result: list[str] = []
        async with anyio.create_task_group() as tg:
            async def turn() -> None:
                result.append(await run_turn(session, prompt))

            tg.start_soon(turn)
            with anyio.fail_after(30):
                while not ready():
                    await anyio.sleep(0.02)
            assert session.cancel()
        return result[0]

    return anyio.run(main)


def test_the_rows_of_turns_with_tools_notes_cancels_and_a_compaction(fake_llm, tmp_path: Path) -> None:
    store = Store(tmp_path / "sessions.db")
    session = make_session(fake_llm, tmp_path, store=store, asker=Asker())
    project = session.cwd
    (project / "a.txt").write_text("".join(f"alpha line {n}\n" for n in range(1500)))
    (project / ".env").write_text("TOKEN=ENV-CANARY-31337\n")
    call = lambda name, **args: {"name": name, "arguments": args}  # noqa: E731
    fake_llm.script([
        {"reasoning": "look first", "tool_calls": [
            call("read_file", path="a.txt"), call("read_file", path=".env"),
            call("write_file", path="b.txt", content="beta\n"),
            call("terminal", command="echo built", background=True, notify_on_complete=True)]},
        {"text": "Started the build."},
        {"text": "The build is done."},
    ])

    async def two_turns() -> None:
        session.steer_notes.append("and keep it short")
        assert await run_turn(session, "read a.txt and build") == "end_turn"
        table = session.tool_state.processes

        def noted() -> bool:  # waiting, or taken already by the first turn (it ends at once)
            return bool(table and table.notes) or any(m.get("process_note") for m in session.messages)

        with anyio.fail_after(20):
            while not noted():
                await anyio.sleep(0.02)
        assert await run_turn(session, "is it done?") == "end_turn"

    anyio.run(two_turns)
    fake_llm.script([{"text": "a long answer that will be cut " * 20, "fault": "stall", "after_chunks": 3}])
    chunks = len(recorded(session).of("TextChunk"))
    streamed = lambda: len(recorded(session).of("TextChunk")) > chunks  # noqa: E731
    assert _cancel_when(session, "explain", streamed) == "cancelled"
    fake_llm.script([{"tool_calls": [call("terminal", command="echo $$ > pid.txt; sleep 30")]}])
    pid = project / "pid.txt"
    assert _cancel_when(session, "run it", lambda: pid.exists() and bool(pid.read_text().strip())) == "cancelled"
    session.summarizer = TemplateSummarizer()
    assert anyio.run(lambda: compact_session(session, force_summary=True)).progress

    rows = written(store, session)
    kinds = {(r["role"], k) for r in rows for k in r}
    for key in [("user", "steer"), ("user", "process_note"), ("assistant", "interrupted"),
                ("assistant", "reasoning"), ("assistant", "usage"), ("assistant", "duration_ms"),
                ("tool", "withheld"), ("tool", "locations"), ("event", "summary")]:
        assert key in kinds, f"the scenario wrote no {key}"
    assert_typed(rows)

    # A crash left a call without a result: the restored session answers it.
    session.append({"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_lost", "name": "terminal", "arguments": '{"command": "make"}'}]})
    restored = new_session(config_of(session),
                           Opening(project, session_id=session.id, history=store.context(session.id)),
                           door=session.door, provider=session.provider, store=store)
    assert restored.messages[-1]["tool_call_id"] == "call_lost"
    assert_typed(written(store, restored))


def test_the_rows_of_thinking_an_attached_image_subagents_and_a_review(fake_llm, tmp_path: Path) -> None:
    store = Store(tmp_path / "sessions.db")
    for name in "abc":
        (tmp_path / name).mkdir()
    thinking = make_session(fake_llm, tmp_path / "a", store=store, model="anthropic:claude-test")
    (thinking.cwd / "a.txt").write_text("x")
    fake_llm.script([{"reasoning": "plan", "signature": "sig-1",
                      "tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
                     {"text": "done"}])
    assert anyio.run(run_turn, thinking, "q") == "end_turn"

    seeing = make_session(fake_llm, tmp_path / "b", store=store, model="openai:gpt-4.1")
    (seeing.cwd / "shot.png").write_bytes(png())
    fake_llm.script(look())
    assert anyio.run(run_turn, seeing, "What is in shot.png?") == "end_turn"

    parent = make_session(fake_llm, tmp_path / "c", store=store)
    fake_llm.respond = router({"one": writes("one", 1)})
    fake_llm.script([delegate("one"), {"text": "Delegated."}])
    assert anyio.run(run_turn, parent, "delegate it") == "end_turn"
    fake_llm.respond = None

    config = config_of(parent, skill_review_interval=1)
    fake_llm.script([{"tool_calls": [{"name": "todo", "arguments": {"todos": [{"id": "1", "content": "x"}]}}]},
                     {"text": "Fixed."},
                     {"tool_calls": [{"name": "skill_manage", "arguments": {
                         "action": "create", "name": "fix-flaky-pytest", "content": SKILL}}]},
                     {"text": "Saved."}])

    async def reviewed() -> None:
        await run_turn(parent, "fix the flaky test")
        review = after_turn(parent, config)
        assert review is not None
        await review()

    anyio.run(reviewed)
    rows = [*written(store, thinking), *written(store, seeing), *written(store, parent)]
    kinds = {(r["role"], k) for r in rows for k in r}
    for key in [("assistant", "thinking_blocks"), ("user", "tool_image"), ("tool", "subagents"),
                ("event", "changes")]:
        assert key in kinds, f"the scenario wrote no {key}"
    assert_typed(rows)
