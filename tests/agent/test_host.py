"""The session host every door uses (`talaria.agent.host`), driven directly with a real store,
real environments' error paths and the fake LLM over HTTP: opening, restoring and forking a
finished session; the environment's fallback for editors and its error for headless doors;
prompt admission, cancel before the turn, the review handed back; errors classified once."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import pytest

from talaria.agent.config import load_config
from talaria.agent.context import tokens
from talaria.agent.door import LocalDoor
from talaria.agent.host import ModelFailure, NoSuchSession, SessionHost
from talaria.tools.environments.base import environment_of
from talaria.tools.errors import EnvError
from talaria.tools.local.workspace import LocalWorkspace
from tests.fakellm import FakeLLM
from tests.helpers import openai_env

pytestmark = pytest.mark.anyio
TODOS = [{"id": "1", "content": "write the parser", "status": "in_progress"}]


class Doors:
    """Local doors recording what each session emits."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def workspace(self, session_id: str, cwd: Path, roots: tuple[Path, ...]) -> Any:
        return LocalWorkspace(cwd, roots)

    def door(self, session_id: str, workspace: Any) -> Any:
        async def record(event: Any) -> None:
            self.events.append(event)

        return LocalDoor(workspace, on_event=record)


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch, fake_llm: FakeLLM) -> None:
    """Providers read the process's environment (as `talaria acp` does)."""
    for name, value in openai_env(fake_llm).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("TALARIA_MODEL", raising=False)


def host(tmp_path: Path, llm: FakeLLM | None, *, editor: bool = True, review: bool = True,
         **settings: Any) -> SessionHost:
    env = {"TALARIA_HOME": str(tmp_path / "home"), "TALARIA_CHECKPOINTS": "false"}
    config = load_config({"model": "openai:fake" if llm else None, **settings}, env=env)
    (tmp_path / "project").mkdir(parents=True, exist_ok=True)
    return SessionHost(config, Doors(), editor=editor, review=review, prestart=False)


async def test_open_prompt_restore_and_fork_keep_the_sessions_state(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script([{"tool_calls": [{"name": "todo", "arguments": {"todos": TODOS}}]},
                     {"text": "Planned."}])
    first = host(tmp_path, fake_llm)
    session = await first.open(tmp_path / "project", mode="plan")
    outcome = await first.prompt(session, "plan the parser")
    assert outcome.stop_reason == "end_turn" and session.title == "plan the parser"
    sid = session.id
    first.close_all()

    again = host(tmp_path, fake_llm)  # a restart: only the store remembers
    with pytest.raises(NoSuchSession) as missing:
        await again.restore("nope", tmp_path / "project")
    assert missing.value.saved
    restored = await again.restore(sid, tmp_path / "project")
    assert (restored.title, restored.permissions.mode) == ("plan the parser", "plan")
    assert restored.tool_state.todos == TODOS
    assert await again.restore(sid, tmp_path / "project") is restored  # open: the same one
    fork = await again.fork(sid, tmp_path / "project")
    assert fork.id != sid and fork.title == "plan the parser (fork)"
    assert fork.tool_state.todos == TODOS and fork.tool_state.todos is not restored.tool_state.todos
    assert [m["role"] for m in fork.messages] == [m["role"] for m in restored.messages]
    assert again.store.get_session(fork.id).title == "plan the parser (fork)"
    await again.delete(fork.id)
    assert fork.id not in again.sessions and again.store.get_session(fork.id) is None
    with pytest.raises(NoSuchSession):
        await again.delete(fork.id)
    again.close_all()


async def test_a_restored_session_goes_on_from_its_kept_token_count(
        tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop's exact count (a provider that reports no usage) is kept with the session;
    restored by a new host (a new process: nothing cached), its messages are not counted again."""
    fake_llm.script([{"text": "Done.", "usage": {"input_tokens": 0, "output_tokens": 0}}])
    first = host(tmp_path, fake_llm)
    session = await first.open(tmp_path / "project")
    prompt = "count these words once " * 50
    assert (await first.prompt(session, prompt)).stop_reason == "end_turn"
    sid, before = session.id, list(session.messages)
    first.close_all()

    tokens.clear_cache()
    counted: list[str] = []
    real = tokens._count
    monkeypatch.setattr(tokens, "_count", lambda text: counted.append(text) or real(text))
    again = host(tmp_path, fake_llm)
    restored = await again.restore(sid, tmp_path / "project")
    assert list(restored.messages) == before
    tools = restored.tool_definitions()
    exact = await restored.context.exact(tools)
    assert prompt not in counted and before[0]["content"] not in counted  # the kept count's
    assert exact == tokens.count_messages(before, tools)
    again.close_all()


async def test_an_editors_bad_environment_falls_back_to_local_a_headless_one_fails(
        tmp_path: Path, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture) -> None:
    editor = host(tmp_path, fake_llm)
    with caplog.at_level(logging.WARNING):
        session = await editor.open(tmp_path / "project", environment="nope")
    assert environment_of(session.workspace).is_local  # type: ignore[union-attr]
    assert "unknown environment 'nope'" in caplog.text and "this session runs on local" in caplog.text
    editor.close_all()
    headless = host(tmp_path, fake_llm, editor=False)
    with pytest.raises(EnvError, match="unknown environment 'nope'"):
        await headless.open(tmp_path / "project", environment="nope")
    assert not headless.sessions
    headless.close_all()


async def test_model_failures_are_classified_once(tmp_path: Path, fake_llm: FakeLLM) -> None:
    unconfigured = host(tmp_path, None)
    with pytest.raises(ModelFailure) as setup:
        await unconfigured.open(tmp_path / "project")
    assert setup.value.setup and "no model configured" in setup.value.message
    fake_llm.script([{"fault": {"status": 401}}])
    configured = host(tmp_path, fake_llm)
    session = await configured.open(tmp_path / "project")
    with pytest.raises(ModelFailure) as refused:
        await configured.prompt(session, "hello")
    assert refused.value.auth and not refused.value.setup and refused.value.data
    assert session.messages[-1]["role"] == "user"  # the prompt is kept, nothing lost
    configured.close_all()


async def test_a_prompt_waits_its_turn_and_a_cancel_reaches_it_before_the_model(
        tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script([{"fault": "stall", "after_chunks": 1, "text": "Thinking"}])
    h = host(tmp_path, fake_llm)
    session = await h.open(tmp_path / "project")
    reading = anyio.Event()
    outcomes: dict[str, str] = {}

    async def slow_content() -> str:
        reading.set()
        await anyio.sleep(60)  # an editor slow to hand over a resource link
        return "never"

    async def first() -> None:
        outcomes["first"] = (await h.prompt(session, "think hard")).stop_reason

    async def second() -> None:
        outcomes["second"] = (await h.prompt(session, "read this", slow_content)).stop_reason

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            while not session.turn_running:
                await anyio.sleep(0.01)
            tg.start_soon(second)
            while not session.prompts.waiting:
                await anyio.sleep(0.01)
            assert h.cancel(session.id)  # the running turn
            await reading.wait()  # the second is admitted and reading its content
            assert not session.turn_running and h.cancel(session.id)
    assert outcomes == {"first": "cancelled", "second": "cancelled"}
    assert not h.cancel(session.id) and not h.running  # nothing left to stop
    h.close_all()


async def test_the_review_is_handed_back_not_run(tmp_path: Path, fake_llm: FakeLLM) -> None:
    todo = {"name": "todo", "arguments": {"todos": TODOS}}
    for review in (True, False):
        fake_llm.script([{"tool_calls": [todo, todo]}, {"text": "Done."}])
        h = host(tmp_path / str(review), fake_llm, review=review, skill_review_interval=2)
        session = await h.open(tmp_path / str(review) / "project")
        served = fake_llm.served
        outcome = await h.prompt(session, "work")
        assert fake_llm.served == served + 2  # the turn's calls only: no review yet
        assert (outcome.after is not None) is review
        h.close_all()


async def test_the_first_request_waits_for_starting_servers_only_up_to_its_bound(
        tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    from talaria.agent.host import host as host_module
    from tests.tools.mcp.servers import stdio

    monkeypatch.setattr(host_module, "FIRST_REQUEST_WAIT_S", 0.5)
    fake_llm.script([{"text": "Without it."}])
    h = host(tmp_path, fake_llm)
    session = await h.open(tmp_path / "project", mcp_servers=(stdio("stuck", "--delay", "30"),))
    with anyio.fail_after(20):  # the bound, not the server's 30 s
        assert (await h.prompt(session, "go")).stop_reason == "end_turn"
    offered = [t["function"]["name"] for t in fake_llm.requests[-1]["json"].get("tools", [])]
    assert offered and not any(name.startswith("mcp__stuck__") for name in offered)
    h.close_all()
