"""What a session host and its front doors exchange: the door factory a door gives the host
(`Doors`), a prompt's end (`Outcome`), and the errors a door translates into its own form
(`ModelFailure`, `NoSuchSession`, `RootsInUse`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from talaria.agent.door import FrontDoor
from talaria.agent.pricing import Spend
from talaria.tools.workspace import Workspace

if TYPE_CHECKING:
    from talaria.agent.context.live import Resumed
    from talaria.agent.providers.errors import ProviderError
    from talaria.agent.store import Store
    from talaria.agent.transcript import Message

Content = str | list[dict[str, Any]]
After = Callable[[], Awaitable[None]]


class Doors(Protocol):
    """How a front door makes the door of each session the host opens for it."""

    def workspace(self, session_id: str, cwd: Path, roots: tuple[Path, ...]) -> Workspace:
        """The door's own workspace (the editor's buffers, the disk) in `cwd`, whose `roots`
        are `roots` (`cwd` first, then the session's additional directories); the host puts
        it in the session's execution environment."""
        ...

    def door(self, session_id: str, workspace: Workspace) -> FrontDoor:
        """The session's door, acting through `workspace`."""
        ...


class ModelFailure(Exception):
    """No model could be made for a session (`setup`: missing or bad configuration), or a
    model call failed (`auth`: credentials missing or refused). `message` is one line: the
    cause and what to do; `data` classifies it for programs."""

    def __init__(self, message: str, *, auth: bool, setup: bool = False,
                 data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.auth = auth
        self.setup = setup
        self.data = data or {}

    @classmethod
    def of(cls, exc: ProviderError, *, setup: bool = False) -> ModelFailure:
        from talaria.agent.providers.errors import AuthError

        return cls(exc.user_message(), auth=isinstance(exc, AuthError), setup=setup,
                   data=exc.to_data())


class NoSuchSession(LookupError):
    """A session id that is not open (`saved` False) or not in the store (`saved` True)."""

    def __init__(self, session_id: str, *, saved: bool) -> None:
        super().__init__(session_id)
        self.session_id = session_id
        self.saved = saved


class RootsInUse(Exception):
    """A session brought back with other additional directories while a turn of it runs: its
    roots cannot change under the turn."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id} is running a turn with other additional "
                         "directories: cancel it or wait for its end, then load it again")
        self.session_id = session_id


@dataclass(frozen=True, slots=True)
class Outcome:
    """A prompt's end: the stop reason to answer with, and what runs once it is out."""

    stop_reason: str
    after: After | None = None
    """The background review (`skills.review.after_turn`) when one is due: the door runs it
    after its answer, so the turn never waits for it."""
    spend: Spend | None = None
    """What the turn's model calls used (its subagents' and compaction summaries' included);
    None for a prompt that ran no turn (`/steer`, `/queue`, cancelled while waiting)."""


def stored_model(model: str | None) -> str | None:
    """A stored session's model when it names a provider (`openai:...`), else the configured."""
    return model if ":" in (model or "") else None


async def queued(session: Any, ahead: int) -> None:
    """The notice a prompt gets when it waits for the running turn."""
    from talaria.agent.events import Notice

    await session.door.emit(Notice(
        f"Queued: this prompt runs after the current turn ({ahead} ahead of it). "
        "/queue lists waiting prompts, /queue clear drops them, /steer talks to the running turn."))


def loaded(store: Store, session_id: str, meta: dict[str, Any]) -> tuple[list[Message], Resumed | None]:
    """A stored session's live context and its kept token count if it still holds (megabytes
    of JSON to parse and texts to hash: call it in a worker thread, issue 9)."""
    from talaria.agent.context.live import COUNTED_META, resumed

    history = store.messages(session_id, include_archived=False)
    return history, resumed(history, meta.get(COUNTED_META))


def closer(workspace: Workspace) -> Callable[[], None]:
    """What closes `workspace` (nothing, for one that holds nothing open)."""
    close = getattr(workspace, "close", None)
    return close if callable(close) else (lambda: None)


_imported: set[str] = set()


async def import_once(modules: tuple[str, ...]) -> None:
    """Import `modules` in a worker thread, each once per process; then keep what start-up
    compiled for the next start (`codecache`: a no-op once written)."""
    import importlib

    import anyio

    from talaria.agent import codecache

    def load(missing: list[str]) -> None:
        for module in missing:
            importlib.import_module(module)
        codecache.save()

    missing = [m for m in modules if m not in _imported]
    if missing:
        await anyio.to_thread.run_sync(load, missing)
        _imported.update(missing)


async def count_ahead(session: Any, threshold: float) -> None:
    """A loaded context's exact count before its first prompt (`LiveContext.count_ahead`);
    counting thousands of texts leaves ~1 MB freed in the heap, handed back."""
    import anyio

    from talaria.agent import heap

    if await session.context.count_ahead(session.tool_definitions(), threshold):
        await anyio.to_thread.run_sync(heap.trim)
