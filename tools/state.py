"""What the tools keep per session, in one typed object the session owns and tools share.

A front door never reaches in here: it sets what it is given to set (the execute_code settings
of a session, through `talaria.agent.options`) and the session closes it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from talaria.tools.execute_code.env import ExecSettings
from talaria.tools.handoffs import Clarifier, Delegate, Vision
from talaria.tools.shell import ShellState

if TYPE_CHECKING:
    from talaria.tools.execute_code.pool import KernelPool, SessionKernel
    from talaria.tools.memory_store import MemoryState
    from talaria.tools.processes.table import ProcessTable
    from talaria.tools.registry import ToolSource
    from talaria.tools.skills.state import SkillsState
    from talaria.tools.web.pages import WebState


@dataclass(slots=True)
class ToolState:
    todos: list[dict[str, str]] = field(default_factory=list)
    """The `todo` tool's list, in the model's order."""
    exec_settings: ExecSettings = field(default_factory=ExecSettings)
    """execute_code's settings; a change restarts the session's kernel at its next call."""
    kernels: KernelPool | None = None
    """The pool this session's kernel lives in: a resource the front door may share among its
    sessions (so at most `max_kernels` run in all). None: the session makes its own."""
    kernel: SessionKernel | None = None
    """This session's place in `kernels`, made at its first script."""
    recall: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    """Answers `session_search` from the session store (blocking; set by the runtime when the
    session has a store). Raises ValueError for arguments it cannot answer."""
    recall_reach: Callable[[dict[str, Any]], tuple[str, ...]] | None = None
    """What a `session_search` call reads beyond this project's sessions (the store, for
    scope="all"): its planned paths, judged by the permission policy. Never raises."""
    skills: SkillsState | None = None
    """Skills of this session (store, what it has viewed, what it changed); None: no skills."""
    memory: MemoryState | None = None
    """The memory files this session writes; None: no memory tool."""
    clarify: Clarifier | None = None
    """Asks the user a `clarify` question (set by the runtime from the front door); None:
    nobody can be asked."""
    delegate: Delegate | None = None
    """Runs `delegate_task`'s subagents (set by the runtime: tools cannot build sessions)."""
    vision: Vision | None = None
    """What vision_analyze may do (attach to the model, ask `vision_model`); None: neither."""
    script_tools: tuple[str, ...] = ()
    """Registered tools beyond execute_code's own list that scripts may call (the web tools,
    when the session offers them)."""
    web: WebState | None = None
    """The web tools' settings and page cache; None: no web tool is offered."""
    sources: list[ToolSource] = field(default_factory=list)
    """Tools that come and go (MCP servers): offered while they are up."""
    shells: dict[str, ShellState] = field(default_factory=dict)
    """`terminal`'s shell state per environment (directory, exported variables)."""
    processes: ProcessTable | None = None
    """Background processes (`terminal(background=true)`, `process`); made at the first."""
    announce: Callable[[str], Awaitable[None]] | None = None
    """Shows the user a notice (set by the runtime from the front door)."""
    cleanups: dict[str, Callable[[], None]] = field(default_factory=dict)
    """Run once when the session closes (name -> callable)."""

    def process_table(self) -> ProcessTable:
        if self.processes is None:
            import tempfile

            from talaria.tools.processes.table import ProcessTable

            self.processes = ProcessTable(Path(tempfile.mkdtemp(prefix="talaria-procs-")),
                                          announce=self.announce)
            self.cleanups["processes"] = self.processes.close
        return self.processes

    def close(self) -> None:
        first = self.cleanups.pop("processes", None)  # while their environment is still up
        if first is not None:
            first()
        for cleanup in self.cleanups.values():
            cleanup()
        self.cleanups.clear()
