"""`AcpClient`: drive `talaria acp` (or any ACP agent) from a Python script, as its editor.

    import anyio
    from talaria.acp_server.client import AcpClient, allow_all

    async def main() -> None:
        async with AcpClient(permission=allow_all) as client:  # spawns `python -m talaria.acp_server acp`
            await client.initialize()                           # fs + terminal advertised
            session = await client.open_session("/abs/path/to/project")
            reason = await client.prompt(session, "Fix the failing test")
            print(reason, [write.path for write in client.writes])

    anyio.run(main)

The client spawns the agent and speaks JSON-RPC over the agent's stdin/stdout. It plays the
editor's part:

- `fs/read_text_file` (`line` / `limit` honoured, -32002 for a missing file) and
  `fs/write_text_file` on the local disk; each write is kept in `writes`, so a caller can see
  which edits arrived through the editor path;
- `terminal/*` run real local processes (see `talaria.acp_server.client.terminals`);
- `session/request_permission` is answered by `permission`: `allow_all`, `reject_all`,
  `ask_on_terminal` (the default), or any `async (params) -> optionId | None` (None: cancelled);
- `session/update` notifications are kept in `updates` and passed to
  `on_update(session_id, update)` (plain or async function) in arrival order; every update of a
  turn has been delivered when `prompt()` returns.

The agent runs in its own process group (Ctrl-C reaches the script, not the agent) with its
stderr going to ours, or to `stderr=` (a path, a file or a file descriptor), never into the
protocol. Leaving the `async with` block closes the agent's stdin, gives it
`exit_grace` seconds to exit (then terminates, then kills it) and kills the terminals it left.

Errors come from `talaria.acp_server.jsonrpc`: `RpcError` when the agent answers with an error (code,
message, data), `PeerError` when no answer comes (the agent exited, or a timeout).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.abc
import anyio.lowlevel

from talaria.acp_server.client.policies import allow_all, ask_on_terminal, reject_all
from talaria.acp_server.client.terminals import LocalTerminals
from talaria.acp_server.jsonrpc import DEFAULT_REQUEST_TIMEOUT, JsonObject, Peer, RpcError

__all__ = ["AcpClient", "Write", "allow_all", "ask_on_terminal", "reject_all"]

PROTOCOL_VERSION = 1
EXIT_GRACE = 5.0
"""Seconds the agent has to exit after its stdin closes, before SIGTERM."""
TERMINATE_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL of the agent."""

Policy = Callable[[JsonObject], Awaitable[str | None]]
UpdateHandler = Callable[[str, JsonObject], Awaitable[None] | None]
Trace = Callable[[str, bytes], None]
"""Called with ("client->agent" | "agent->client", one JSON line) for every message."""


@dataclass(frozen=True, slots=True)
class Write:
    """One `fs/write_text_file` the agent made."""

    session_id: str
    path: str
    content: str


def default_command() -> list[str]:
    return [sys.executable, "-m", "talaria.acp_server", "acp"]


class AcpClient:
    """An ACP client session with one agent process; use as an async context manager."""

    def __init__(
        self,
        command: Sequence[str] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        permission: Policy = ask_on_terminal,
        on_update: UpdateHandler | None = None,
        stderr: str | Path | IO[Any] | int | None = None,
        trace: Trace | None = None,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        exit_grace: float = EXIT_GRACE,
    ) -> None:
        """`command` defaults to this Python running `-m talaria.acp_server acp`; `env` replaces the
        environment (as in `subprocess`; default: ours), `cwd` is the agent's working directory."""
        self.command = list(command) if command else default_command()
        self.env = dict(os.environ if env is None else env)
        self.cwd = cwd
        self.permission = permission
        self.on_update = on_update
        self.trace = trace
        self.request_timeout = request_timeout
        self.exit_grace = exit_grace
        self.writes: list[Write] = []
        self.updates: list[tuple[str, JsonObject]] = []
        self.calls: Counter[str] = Counter()
        """How many requests of each method the agent made to us."""
        self.agent: JsonObject = {}
        """The agent's `initialize` result (capabilities, agentInfo, authMethods)."""
        self.session_cwds: dict[str, Path] = {}
        self._stderr = stderr
        self._stack = contextlib.AsyncExitStack()
        self._update_lock = anyio.Lock()
        self._ask_lock = anyio.Lock()
        self._asking: dict[str, set[anyio.CancelScope]] = {}
        self.process: anyio.abc.Process | None = None
        self._peer: Peer | None = None
        self._terminals: LocalTerminals | None = None

    @property
    def peer(self) -> Peer:
        """The JSON-RPC connection, for methods this class does not wrap."""
        if self._peer is None:
            raise RuntimeError("AcpClient is not running: use `async with AcpClient(...)`")
        return self._peer

    @property
    def terminals(self) -> LocalTerminals:
        if self._terminals is None:
            raise RuntimeError("AcpClient is not running: use `async with AcpClient(...)`")
        return self._terminals

    # -- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> AcpClient:
        stack = self._stack
        await stack.__aenter__()
        try:
            stderr = self._stderr
            if isinstance(stderr, str | Path):
                stderr = stack.enter_context(open(stderr, "ab"))  # noqa: SIM115 - the stack closes it
            # Its own process group: Ctrl-C reaches the script, whose exit then stops the agent
            # cleanly (stdin closed) instead of both dying mid-message.
            self.process = proc = await anyio.open_process(
                self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                env=self.env, cwd=self.cwd, start_new_session=True,
            )
            stack.push_async_callback(_close_process, proc)
            assert proc.stdout is not None and proc.stdin is not None
            reader: Any = proc.stdout
            writer: Any = proc.stdin
            if self.trace is not None:
                reader, writer = _TracedReader(reader, self.trace), _TracedWriter(writer, self.trace)
            self._peer = peer = Peer(reader, writer)
            peer.on_request("session/request_permission", self._request_permission)
            peer.on_notification("session/update", self._session_update)
            tg = await stack.enter_async_context(anyio.create_task_group())
            self._terminals = LocalTerminals(tg, self._terminal_cwd)
            stack.push_async_callback(self._shutdown, tg)  # runs first, with the tasks alive
            tg.start_soon(peer.serve, name="acp client")
        except BaseException:
            await stack.aclose()
            raise
        return self

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool | None:
        try:
            return await self._stack.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            # The task group wraps the body's own exception; callers want their RpcError back.
            if exc is not None and group.exceptions == (exc,):
                raise exc from None
            raise

    async def _shutdown(self, tg: anyio.abc.TaskGroup) -> None:
        """Close the agent's stdin, wait for it to exit (terminate, kill), kill leftover terminals."""
        proc = self.process
        assert proc is not None and proc.stdin is not None
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(Exception):
                await proc.stdin.aclose()
            with anyio.move_on_after(self.exit_grace):
                await proc.wait()
            for stop in (proc.terminate, proc.kill):
                if proc.returncode is not None:
                    break
                with contextlib.suppress(ProcessLookupError):
                    stop()
                with anyio.move_on_after(TERMINATE_GRACE):
                    await proc.wait()
            if self._terminals is not None:
                await self._terminals.close_all()
        tg.cancel_scope.cancel()

    # -- client -> agent ------------------------------------------------------------------

    async def initialize(self, *, fs: bool = True, terminal: bool = True) -> JsonObject:
        """Say which editor methods we serve; returns the agent's capabilities and info."""
        peer = self.peer
        if fs:
            peer.on_request("fs/read_text_file", self._counted("fs/read_text_file", self.read_text_file))
            peer.on_request("fs/write_text_file", self._counted("fs/write_text_file", self.write_text_file))
        if terminal:
            t = self.terminals
            for name, handler in (("create", t.create), ("output", t.output),
                                  ("wait_for_exit", t.wait_for_exit), ("kill", t.kill),
                                  ("release", t.release)):
                peer.on_request(f"terminal/{name}", self._counted(f"terminal/{name}", handler))
        self.agent = await self._request("initialize", {
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": {"fs": {"readTextFile": fs, "writeTextFile": fs}, "terminal": terminal},
            "clientInfo": {"name": "talaria-client", "title": "Talaria ACP client", "version": "0.1.0"},
        })
        return self.agent

    async def open_session(self, cwd: str | Path, mcp_servers: Sequence[JsonObject] = (),
                           additional_dirs: Sequence[str | Path] = ()) -> str:
        """Start a session in `cwd` (made absolute), with more directories of its project
        (`additionalDirectories`, made absolute); returns its id."""
        cwd = Path(os.path.abspath(cwd))
        dirs = {"additionalDirectories": [os.path.abspath(d) for d in additional_dirs]}
        result = await self._request("session/new", {
            "cwd": str(cwd), "mcpServers": list(mcp_servers), **(dirs if additional_dirs else {})})
        session_id = result["sessionId"]
        self.session_cwds[session_id] = cwd
        return session_id

    async def load_session(self, session_id: str, cwd: str | Path) -> JsonObject:
        """Reopen a stored session; its history arrives as updates before this returns."""
        cwd = Path(os.path.abspath(cwd))
        result = await self._request(
            "session/load", {"sessionId": session_id, "cwd": str(cwd), "mcpServers": []}
        )
        self.session_cwds[session_id] = cwd
        await self._updates_delivered()
        return result

    async def prompt(self, session_id: str, prompt: str | Sequence[JsonObject]) -> str:
        """Run one turn; returns its stop reason (`end_turn`, `cancelled`, ...)."""
        blocks = [{"type": "text", "text": prompt}] if isinstance(prompt, str) else list(prompt)
        result = await self.peer.request(
            "session/prompt", {"sessionId": session_id, "prompt": blocks}, timeout=None
        )
        await self._updates_delivered()
        return result["stopReason"]

    async def cancel(self, session_id: str) -> None:
        """Cancel the running turn; pending permission questions are answered `cancelled`."""
        await self.peer.notify("session/cancel", {"sessionId": session_id})
        for scope in self._asking.get(session_id, ()):
            scope.cancel()

    async def set_mode(self, session_id: str, mode_id: str) -> None:
        await self._request("session/set_mode", {"sessionId": session_id, "modeId": mode_id})

    async def list_sessions(self, cwd: str | Path | None = None, cursor: str | None = None) -> JsonObject:
        """One page: `{"sessions": [...], "nextCursor"?: str}`."""
        params: JsonObject = {}
        if cwd is not None:
            params["cwd"] = os.path.abspath(cwd)
        if cursor is not None:
            params["cursor"] = cursor
        return await self._request("session/list", params)

    async def _request(self, method: str, params: JsonObject) -> Any:
        return await self.peer.request(method, params, timeout=self.request_timeout)

    async def _updates_delivered(self) -> None:
        # Updates precede the response on the wire, and the peer starts one handler task per
        # notification in arrival order; those tasks queue on the (FIFO) lock before this one.
        await anyio.lowlevel.checkpoint()
        async with self._update_lock:
            pass

    # -- agent -> client ------------------------------------------------------------------

    async def read_text_file(self, params: JsonObject) -> JsonObject:
        """`fs/read_text_file` from the local disk. Override to serve unsaved buffers."""
        from talaria.tools.local.workspace import read_text_sync
        from talaria.tools.workspace import WorkspaceError

        path = _absolute(params)
        try:
            text = await anyio.to_thread.run_sync(read_text_sync, path)
        except FileNotFoundError:
            raise RpcError.resource_not_found(f"no such file: {path}") from None
        except (WorkspaceError, OSError) as exc:
            raise RpcError.internal(str(exc)) from None
        line, limit = params.get("line"), params.get("limit")
        if isinstance(line, int) and line > 1 or isinstance(limit, int):
            lines = text.splitlines(keepends=True)
            start = max(line, 1) - 1 if isinstance(line, int) else 0
            end = start + max(limit, 0) if isinstance(limit, int) else None
            text = "".join(lines[start:end])
        return {"content": text}

    async def write_text_file(self, params: JsonObject) -> JsonObject:
        """`fs/write_text_file` to the local disk (atomic, parents created); kept in `writes`."""
        from talaria.tools.local.workspace import write_text_sync
        from talaria.tools.workspace import WorkspaceError

        path = _absolute(params)
        content = params.get("content")
        if not isinstance(content, str):
            raise RpcError.invalid_params("`content` must be a string")
        try:
            await anyio.to_thread.run_sync(write_text_sync, path, content)
        except (WorkspaceError, OSError) as exc:
            raise RpcError.internal(str(exc)) from None
        self.writes.append(Write(str(params.get("sessionId", "")), str(path), content))
        return {}

    async def _request_permission(self, params: JsonObject) -> JsonObject:
        self.calls["session/request_permission"] += 1
        session_id = str(params.get("sessionId", ""))
        choice: str | None = None
        with anyio.CancelScope() as scope:
            self._asking.setdefault(session_id, set()).add(scope)
            try:
                async with self._ask_lock:  # one question at a time
                    choice = await self.permission(params)
            finally:
                self._asking[session_id].discard(scope)
        if choice is None:
            return {"outcome": {"outcome": "cancelled"}}
        return {"outcome": {"outcome": "selected", "optionId": choice}}

    async def _session_update(self, params: JsonObject) -> None:
        async with self._update_lock:
            session_id, update = str(params.get("sessionId", "")), params.get("update")
            if not isinstance(update, dict):
                return
            self.updates.append((session_id, update))
            if self.on_update is not None:
                result = self.on_update(session_id, update)
                if inspect.isawaitable(result):
                    await result

    def _counted(self, method: str, handler: Callable[[JsonObject], Awaitable[Any]]) -> Any:
        async def counted(params: JsonObject) -> Any:
            self.calls[method] += 1
            return await handler(params)

        return counted

    def _terminal_cwd(self, session_id: str) -> Path:
        return self.session_cwds.get(session_id) or Path(self.cwd or os.getcwd())


async def _close_process(proc: anyio.abc.Process) -> None:
    with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
        if proc.returncode is None:
            proc.kill()
        await proc.aclose()


def _absolute(params: JsonObject) -> Path:
    path = params.get("path")
    if not isinstance(path, str) or not os.path.isabs(path):
        raise RpcError.invalid_params("`path` must be an absolute path")
    return Path(path)


class _TracedReader(anyio.abc.ByteReceiveStream):
    def __init__(self, inner: anyio.abc.ByteReceiveStream, trace: Trace) -> None:
        self._inner, self._trace, self._buf = inner, trace, b""

    async def receive(self, max_bytes: int = 65536) -> bytes:
        chunk = await self._inner.receive(max_bytes)
        *lines, self._buf = (self._buf + chunk).split(b"\n")
        for line in lines:
            self._trace("agent->client", line)
        return chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _TracedWriter(anyio.abc.ByteSendStream):
    def __init__(self, inner: anyio.abc.ByteSendStream, trace: Trace) -> None:
        self._inner, self._trace = inner, trace

    async def send(self, item: bytes) -> None:
        self._trace("client->agent", item.rstrip(b"\n"))  # the peer sends one whole line
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

