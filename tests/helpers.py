"""Small builders shared by the agent-level tests."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from talaria.agent.config import load_config
from talaria.agent.door import LocalDoor
from talaria.agent.permissions import deny_all
from talaria.agent.runtime import Opening, new_session
from talaria.agent.session import Session
from talaria.agent.store import Store
from talaria.tools.local.workspace import LocalWorkspace
from tests import TESTS, processes
from tests.fakellm import FakeLLM


def openai_env(llm: FakeLLM) -> dict[str, str]:
    return {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": llm.openai_base_url}


def make_session(
    llm: FakeLLM, root: Path, *, model: str = "openai:fake-model", mode: str = "bypass",
    store: Store | None = None, fallbacks: tuple[str, ...] = (), asker: Any = deny_all,
    **config: Any,
) -> Session:
    """A session on `root/project` whose door records its events: `events(session)`."""
    from talaria.agent.providers.factory import create_retrying_provider

    env = {"TALARIA_HOME": str(root / ".home"), **openai_env(llm),
           "ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": llm.anthropic_base_url}
    cfg = load_config(config, env=env)
    provider = create_retrying_provider(model, fallbacks, env=env, base_delay=0.01, max_delay=0.05)
    project = root / "project"
    project.mkdir(exist_ok=True)
    door = LocalDoor(LocalWorkspace(project), on_event=Recorder(), asker=asker)
    return new_session(cfg, Opening(project, mode=mode), door=door, provider=provider, store=store)


def recorded(session: Session) -> Recorder:
    """The Recorder of a session made by `make_session`."""
    recorder = session.door.on_event  # type: ignore[attr-defined]
    assert isinstance(recorder, Recorder)
    return recorder


class Recorder:
    """An `emit` that keeps every event."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    async def __call__(self, event: Any) -> None:
        self.events.append(event)

    def of(self, name: str) -> list[Any]:
        return [e for e in self.events if type(e).__name__ == name]


def assert_pairs_complete(messages: list[dict[str, Any]]) -> None:
    """Every tool call has exactly one result, right after its assistant message."""
    pending: list[str] = []
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in pending, message
            pending.remove(message["tool_call_id"])
        else:
            assert not pending, f"tool calls without results: {pending}"
            pending = [c["id"] for c in message.get("tool_calls") or ()]
    assert not pending, f"tool calls without results: {pending}"


def group_alive(pgid: int) -> bool:
    """Any live (non-zombie) process in the group; this container's init does not reap."""
    for proc in processes():
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def check_golden(name: str, text: str) -> None:
    """`text` equals tests/golden/NAME; TALARIA_UPDATE_GOLDEN=1 rewrites the file instead."""
    path = TESTS / "golden" / name
    if os.environ.get("TALARIA_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing {path}; run with TALARIA_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"{name} changed; TALARIA_UPDATE_GOLDEN=1 to accept"
