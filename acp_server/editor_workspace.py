"""EditorWorkspace: the Workspace seam over the editor's ACP client methods.

Reads go through `fs/read_text_file` (unsaved buffers win), writes through
`fs/write_text_file` (edits land in the editor's review UI), commands through
`terminal/create` + `terminal/wait_for_exit` + `terminal/output`, always followed by
`terminal/release`; a sandboxed command reaches the editor wrapped in the sandbox launcher.
Each capability the client does not advertise falls back to the local workspace, per
capability: CodeCompanion advertises fs but no terminal.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from talaria.acp_server.editor_processes import EditorBackground, terminal_env
from talaria.acp_server.jsonrpc import Peer, PeerError, RpcError
from talaria.tools.local.workspace import LocalWorkspace, StateFile, sandboxed
from talaria.tools.workspace import CommandResult, SearchPage, WorkspaceError

if TYPE_CHECKING:
    from talaria.tools.processes.base import Background, ProcessLog
    from talaria.tools.sandbox.tiers import SandboxSpec

FS_TIMEOUT = 30.0
"""Seconds to wait for an `fs/*` answer; some clients never answer what they don't know."""
TERMINAL_CALL_TIMEOUT = 30.0
NOT_FOUND = -32002


class EditorWorkspace:
    def __init__(
        self, peer: Peer, session_id: str, capabilities: dict[str, Any], local: LocalWorkspace
    ) -> None:
        fs = capabilities.get("fs") or {}
        self.peer = peer
        self.session_id = session_id
        self.local = local
        self.cwd = local.cwd
        self.roots = local.roots
        # `is True`: the schema's booleans; "terminal": "no" must not turn the terminal on.
        self.can_read = fs.get("readTextFile") is True
        self.can_write = fs.get("writeTextFile") is True
        self.can_terminal = capabilities.get("terminal") is True

    async def read_text(self, path: Path) -> str:
        if not self.can_read:
            return await self.local.read_text(path)
        result = await self._request("fs/read_text_file", {"path": str(path)}, FS_TIMEOUT,
                                     reading=path)
        content = result.get("content")
        if not isinstance(content, str):
            raise WorkspaceError(f"the editor returned no text for {path}")
        # Some clients (CodeCompanion) answer "" for a missing file instead of an error.
        if content == "" and not path.exists():
            raise FileNotFoundError(str(path))
        if "\x00" in content:
            raise WorkspaceError(f"binary file: {path}")
        return content

    async def write_text(self, path: Path, text: str) -> None:
        if not self.can_write:
            return await self.local.write_text(path, text)
        self.local.files_may_change()
        await self._request("fs/write_text_file", {"path": str(path), "content": text}, FS_TIMEOUT)

    async def search(self, pattern: str, **kwargs: Any) -> SearchPage:
        return await self.local.search(pattern, **kwargs)

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
        if not self.can_terminal:
            return await self.local.run(command, cwd=cwd, timeout=timeout, output_limit=output_limit,
                                        on_terminal=on_terminal, sandbox=sandbox, shell=shell)
        self.local.files_may_change()
        # The editor runs on this machine: the shell's files are ours (StateFile).
        with StateFile(shell, sandbox) as state:
            argv, cleanup = ["bash", "-c", command], None
            if state.sandbox is not None:  # the editor runs the sandbox launcher, which runs bash
                prepared = await anyio.to_thread.run_sync(sandboxed, argv, state.sandbox, False)
                argv, cleanup = prepared.argv, prepared.cleanup
            try:
                result = await self._run_in_terminal(argv, cwd, timeout, output_limit, on_terminal,
                                                     terminal_env(state.env))
            finally:
                if cleanup is not None:
                    cleanup()
            return state.into(result)

    async def start(self, command: str, *, cwd: Path, sandbox: SandboxSpec | None = None,
                    name: str, log: ProcessLog, shell: str | None = None) -> Background:
        if not self.can_terminal:
            return await self.local.start(command, cwd=cwd, sandbox=sandbox, name=name, log=log,
                                          shell=shell)
        self.local.files_may_change()
        return await EditorBackground.start(self, command, cwd=cwd, sandbox=sandbox, name=name,
                                            log=log, shell=shell)

    async def _run_in_terminal(
        self, argv: list[str], cwd: Path, timeout: float, output_limit: int,
        on_terminal: Callable[[str], Awaitable[None]] | None, env: list[dict[str, str]],
    ) -> CommandResult:
        # Shielded: a cancel during terminal/create would drop its answer, and the editor's
        # process would run on, never killed nor released. A cancel that came meanwhile is
        # honoured at the first await below, which kills and releases the terminal.
        with anyio.CancelScope(shield=True):
            created = await self._call("terminal/create", {
                "command": argv[0], "args": argv[1:], "cwd": str(cwd), "env": env,
                "outputByteLimit": output_limit,
            })
        terminal_id = created.get("terminalId")
        if not isinstance(terminal_id, str):
            raise WorkspaceError("the editor's terminal/create returned no terminalId")
        try:
            if on_terminal is not None:
                await on_terminal(terminal_id)
            exit_status: dict[str, Any] | None = None
            with anyio.move_on_after(timeout):
                exit_status = await self._request(
                    "terminal/wait_for_exit", {"terminalId": terminal_id}, None)
            if exit_status is None:
                await self._call("terminal/kill", {"terminalId": terminal_id})
            output = await self._call("terminal/output", {"terminalId": terminal_id})
        except BaseException:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await self._call("terminal/kill", {"terminalId": terminal_id})
            raise
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await self._call("terminal/release", {"terminalId": terminal_id})
        text = output.get("output", "")
        if output.get("truncated"):
            text = "[earlier output truncated by the editor]\n" + text
        code = (exit_status or output.get("exitStatus") or {}).get("exitCode")
        return CommandResult(
            exit_code=code if exit_status is not None else None, output=text,
            omitted_bytes=0, timed_out=exit_status is None, terminal_id=terminal_id,
        )

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One `terminal/*` request of this session (WorkspaceError when it fails)."""
        return await self._request(method, params, TERMINAL_CALL_TIMEOUT)

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """`call` without a time limit (`terminal/wait_for_exit` of a background process)."""
        return await self._request(method, params, None)

    async def _call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await self._request(method, params, TERMINAL_CALL_TIMEOUT)

    async def _request(self, method: str, params: dict[str, Any], timeout: float | None,
                       *, reading: Path | None = None) -> dict[str, Any]:
        """The editor's answer (`{}` for a null result). The one place where the editor's
        failures become WorkspaceError, or FileNotFoundError for a missing file being read."""
        try:
            result = await self.peer.request(
                method, {"sessionId": self.session_id, **params}, timeout=timeout)
        except RpcError as exc:
            if reading is not None and (exc.code == NOT_FOUND or not reading.exists()):
                raise FileNotFoundError(str(reading)) from None
            raise WorkspaceError(f"the editor's {method} failed: {editor_reason(exc)}") from None
        except PeerError as exc:
            raise WorkspaceError(f"the editor did not answer {method}: {exc}") from None
        return result if isinstance(result, dict) else {}



REASON_CHARS = 300
"""Characters of an editor's error message and details kept for the model and the user."""


def editor_reason(exc: RpcError) -> str:
    """What the editor said of a refused request: its message, and its `data` (a string, or
    the `details` / `message` / `reason` of an object) when that says more, e.g. acpx's
    "Internal error" with `data.details: "Permission denied for fs/read_text_file (--deny-all)"`."""
    data = exc.data
    if isinstance(data, dict):
        data = next((data[k] for k in ("details", "message", "reason") if isinstance(data.get(k), str)),
                    None)
    parts = [exc.message.strip() or f"error {exc.code}"]
    if isinstance(data, str) and data.strip() and data.strip() not in parts[0]:
        parts.append(data.strip())
    text = ": ".join(parts)
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"
