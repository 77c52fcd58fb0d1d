"""The Workspace seam: everything a tool does to the outside world goes through it.

Implementations: `talaria.tools.local.workspace.LocalWorkspace` (disk and subprocesses) and, in the ACP door,
`EditorWorkspace` (the editor's `fs/*` and `terminal/*` methods, falling back to local per
capability). Tools receive it in their `ToolContext` (talaria.tools.context).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from talaria.tools.processes.base import Background, ProcessLog
    from talaria.tools.sandbox.tiers import SandboxSpec

from talaria.tools.errors import WorkspaceError

__all__ = ["CommandResult", "SearchMatch", "SearchPage", "Workspace", "WorkspaceError"]


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_code: int | None
    """None when the command was killed (timeout, cancel)."""
    output: str
    """Combined stdout and stderr, capped head + tail."""
    omitted_bytes: int = 0
    timed_out: bool = False
    terminal_id: str | None = None
    """Set when the command ran in the editor's terminal."""
    state: bytes | None = None
    """With `shell`: what the command's EXIT trap saved (`talaria.tools.shell`); None
    when it saved nothing (killed, timed out, replaced by exec)."""
    state_start: bytes | None = None
    """With `shell`, on a shell's first command: the state it started with."""


@dataclass(frozen=True, slots=True)
class SearchMatch:
    path: str
    """Path relative to the search root."""
    line: int | None = None
    text: str | None = None


@dataclass(frozen=True, slots=True)
class SearchPage:
    """One page of a search's matches, in path order (then line number)."""

    matches: list[SearchMatch]
    total: int
    """How many matches there are; a lower bound when `total_exact` is False."""
    total_exact: bool = True

    @classmethod
    def of(cls, found: list[SearchMatch], *, offset: int, limit: int) -> SearchPage:
        """The page from the first matches a search found when it stopped at `search_cap(offset,
        limit)`: having that many, it knows there are more, and its count is a lower bound
        (counting the rest would read the whole tree, whatever the page)."""
        exact = len(found) < search_cap(offset, limit)
        return cls(found[offset:offset + limit], len(found), exact)

    @classmethod
    def arranged(cls, page: list[SearchMatch], *, total: int, complete: bool) -> SearchPage:
        """A page of matches in the order a search found them, of `total` found (`complete`:
        all there are, else a bound), put in path order: by file (a page's matches are in a
        few, each file's found together and by line, so each path is split once), then
        line."""
        files: dict[str, list[SearchMatch]] = {}
        for m in page:
            if (same := files.get(m.path)) is None:
                files[m.path] = same = []
            same.append(m)
        ordered: list[SearchMatch] = []
        for path in sorted(files, key=_components):
            same = files[path]
            by_line = all((a.line or 0) <= (b.line or 0)
                          for a, b in zip(same, same[1:], strict=False))
            ordered += same if by_line else sorted(same, key=path_order)
        return cls(ordered, total, complete)


def path_order(match: SearchMatch) -> tuple[list[str], int]:
    """By path components (`a/x` before `a-b`), then line number."""
    return _components(match.path), match.line or 0


def _components(path: str) -> list[str]:
    return path.split("/")


MAX_SEARCH_MATCHES = 10_000
"""The most matches a search collects, however far `offset` goes."""


def search_cap(offset: int, limit: int) -> int:
    """How many matches a search collects for a page: one past its end (is there more?)."""
    return min(offset + limit + 1, MAX_SEARCH_MATCHES)


class Workspace(Protocol):
    cwd: Path
    roots: tuple[Path, ...]

    async def read_text(self, path: Path) -> str:
        """Whole text of a file (unsaved editor buffers win). Raises FileNotFoundError,
        WorkspaceError (binary, too large, not a file)."""
        ...

    async def write_text(self, path: Path, text: str) -> None:
        """Write a whole file, creating parents; keeps an existing file's mode."""
        ...

    async def search(
        self,
        pattern: str,
        *,
        root: Path,
        target: str = "content",
        file_glob: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> SearchPage:
        """Regex over contents (`content`) or glob over names (`files`): the page at
        `offset`, in path order; the search stops once it has `search_cap` matches."""
        ...

    async def run(
        self,
        command: str,
        *,
        cwd: Path,
        timeout: float,
        output_limit: int,
        on_terminal: Callable[[str], Awaitable[None]] | None = None,
        sandbox: SandboxSpec | None = None,
        shell: str | None = None,
    ) -> CommandResult:
        """Run a shell command in its own process group; killed with the group on
        timeout or cancellation. `on_terminal(terminal_id)` is awaited once when the
        command runs in an editor terminal, so the tool call can embed it. With `sandbox`
        the command runs confined by it (`talaria.tools.sandbox.tiers.prepare`), in the
        editor's terminal too; raises WorkspaceError when the sandbox cannot be set up.
        `shell`: bash code its shell runs first (`$BASH_ENV`), which may save the shell's
        state to `$TALARIA_SHELL_STATE`, a file the workspace provides (writable in the
        sandbox too); the result carries what was saved (`state`, `state_start`; see
        `talaria.tools.shell`)."""
        ...

    async def start(
        self, command: str, *, cwd: Path, sandbox: SandboxSpec | None = None, name: str,
        log: ProcessLog, shell: str | None = None,
    ) -> Background:
        """Start a long-lived command (`terminal(background=true)`) in its own process group
        and return at once; its output goes to `log`; `name` (the process id the model sees)
        is in its environment as `$TALARIA_PROC`. Raises FileNotFoundError for a missing
        `cwd`, WorkspaceError when it cannot start (see `talaria.tools.processes`)."""
        ...
