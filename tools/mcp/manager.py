"""A session's MCP servers: started in parallel without holding the session up, offered as
tools while they are up (a `ToolSource`), restarted with backoff (not one whose command does
not exist: no restart mends that), stopped with the session.

    manager = McpManager(servers, cwd=..., start_timeout=..., call_timeout=..., ...)
    manager.start()                      # returns at once; tools arrive as servers are ready
    session.tool_state.sources.append(manager)
    ...
    manager.close()                      # at session close: every server process is killed

The servers live on an event loop of their own, in a thread ("talaria-mcp"): the MCP SDK
takes ~0.7 s to import and keeps each connection in a task that must outlive any one
prompt, and none of that may hold up the editor's event loop. Calls cross over with
`BlockingPortal.call_async` (cancelling the caller cancels the call on the server).

Restarts: a server that failed (did not start, crashed) is tried again when the session
next asks for its tools (at the next model call), once its backoff has passed (1 s, then
doubling to 60 s), at most MAX_RESTARTS times. The user hears once when it fails, once if
it comes back, once when it is given up; not at every attempt.
"""

from __future__ import annotations

import collections
import contextlib
import fnmatch
import logging
import threading
import time
from pathlib import Path
from typing import Any

import anyio

from talaria.tools.errors import McpError
from talaria.tools.mcp import results
from talaria.tools.mcp.connection import Connection
from talaria.tools.mcp.settings import BACKOFF_FIRST_S, BACKOFF_MAX_S, MAX_RESTARTS, ServerSpec
from talaria.tools.mcp.specs import resource_specs, scriptable, server_specs
from talaria.tools.registry import ToolSpec

log = logging.getLogger(__name__)

POLL_S = 0.02


class McpManager:
    def __init__(self, servers: list[ServerSpec], *, cwd: Path, start_timeout: float,
                 call_timeout: float, script_tools: tuple[str, ...], cache_dir: Path) -> None:
        self.conns = {s.name: Connection(s, cwd, start_timeout, call_timeout, self._changed)
                      for s in servers}
        self.script_globs = script_tools
        """Globs over tool names execute_code scripts may call (config `mcp_script_tools`)."""
        self.cache_dir = cache_dir
        self._specs: dict[str, list[ToolSpec]] = {}
        self._resources = resource_specs(self.list_resources, self.read_resource)
        self._notices: collections.deque[str] = collections.deque()
        self._portal: Any = None
        self._portal_cm: Any = None
        self._closed = False
        self._lock = threading.Lock()

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Start the MCP thread and every server; returns at once."""
        if not self.conns or self._portal is not None:
            return
        from anyio.from_thread import start_blocking_portal

        from talaria.tools import procs

        procs.ensure_watchdog()  # here, not on the MCP thread: it is not thread-safe
        self._portal_cm = start_blocking_portal(name="talaria-mcp")
        self._portal = self._portal_cm.__enter__()
        for conn in self.conns.values():
            self._portal.start_task_soon(conn.run)

    def close(self) -> None:
        """Kill every server now; the MCP thread winds down in the background."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for conn in self.conns.values():
            if conn.stdio is not None:
                conn.stdio.kill()
        if self._portal is not None:
            threading.Thread(target=self._shutdown, name="talaria-mcp-stop", daemon=True).start()

    async def aclose(self) -> None:
        """`close`, then wait until the MCP thread has ended (tests, benchmarks)."""
        self.close()
        await anyio.to_thread.run_sync(self._shutdown)

    def _shutdown(self) -> None:
        with self._lock:
            cm, self._portal_cm = self._portal_cm, None
        if cm is None:
            return
        with contextlib.suppress(RuntimeError):  # already stopped
            self._portal.call(self._portal.stop, True)  # cancels every server's task
        cm.__exit__(None, None, None)

    async def wait_ready(self, timeout: float) -> bool:
        """Wait until no server is starting (headless runs want every tool from the first
        model call); False when `timeout` passed first."""
        with anyio.move_on_after(timeout):
            while any(c.status in ("new", "starting") for c in self.conns.values()):
                await anyio.sleep(POLL_S)
            return True
        return False

    # -- the ToolSource ---------------------------------------------------------------------

    def specs(self) -> list[ToolSpec]:
        self._restart_due()
        specs = [spec for name in self.conns for spec in self._specs.get(name, ())]
        if any(c.status == "ready" and c.listing.resources for c in self.conns.values()):
            specs += self._resources
        return specs

    def script_specs(self) -> list[ToolSpec]:
        if not self.script_globs:
            return []
        return [s for name in self.conns for s in self._specs.get(name, ())
                if any(fnmatch.fnmatchcase(s.name, g) for g in self.script_globs) and scriptable(s)]

    def notices(self) -> list[str]:
        out = []
        while self._notices:
            out.append(self._notices.popleft())
        return out

    def status(self) -> list[dict[str, Any]]:
        """Each server's state, for `/mcp`."""
        return [{"name": c.spec.name, "origin": c.spec.origin, "transport": c.spec.transport,
                 "status": c.status, "tools": len(self._specs.get(c.spec.name, ())),
                 "prompts": [p.name for p in c.listing.prompts], "error": c.error}
                for c in self.conns.values()]

    # -- calls (from the session's event loop) ----------------------------------------------

    async def call_tool(self, server: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        conn = self._conn(server)
        result = await self._request(conn, f"the call of {tool}",
                                     lambda client: client.call_tool(tool, args))
        return results.tool_result(result, self.cache_dir)

    async def list_resources(self, server: str | None) -> dict[str, Any]:
        listed: list[dict[str, Any]] = []
        errors: dict[str, str] = {}
        for conn in self.conns.values():
            if (server and conn.spec.name != server) or conn.status != "ready" \
                    or not conn.listing.resources:
                continue
            try:
                page = await self._request(conn, "resources/list", lambda c: c.list_resources())
            except McpError as exc:
                errors[conn.spec.name] = str(exc)
                continue
            listed += [{"server": conn.spec.name, "uri": str(r.uri), "name": r.name,
                        "description": r.description or "", "mime_type": r.mime_type or ""}
                       for r in page.resources]
        out: dict[str, Any] = {"resources": listed}
        if errors:
            out["errors"] = errors
        if server and server not in self.conns:
            out["error"] = f"no MCP server {server!r}; servers: {', '.join(self.conns)}"
        return out

    async def read_resource(self, server: str, uri: str) -> dict[str, Any]:
        conn = self._conn(server)
        result = await self._request(conn, f"reading {uri}", lambda c: c.read_resource(uri))
        return results.resource_result(result, self.cache_dir)

    async def get_prompt(self, server: str, name: str, arguments: dict[str, str]) -> Any:
        conn = self._conn(server)
        return await self._request(conn, f"the prompt {name}",
                                   lambda c: c.get_prompt(name, arguments))

    def _conn(self, server: str) -> Connection:
        conn = self.conns.get(server)
        if conn is None:
            raise McpError(f"no MCP server {server!r}; servers: {', '.join(self.conns) or 'none'}")
        return conn

    async def _request(self, conn: Connection, what: str, send: Any) -> Any:
        if self._portal is None or self._closed:
            raise McpError("the session's MCP servers are stopped")
        try:
            return await self._portal.call_async(conn.request, what, send)
        except RuntimeError as exc:  # the portal stopped meanwhile (session closing)
            raise McpError(f"the session's MCP servers are stopped ({exc})") from None

    # -- status changes (on the MCP thread) -------------------------------------------------

    def _changed(self, conn: Connection, before: str, status: str) -> None:
        name, origin = conn.spec.name, conn.spec.origin
        if status == "ready":
            self._specs[name] = server_specs(conn, self.call_tool)
            if conn.failures:
                self._notices.append(f"MCP server {name!r} is back ({len(self._specs[name])} tools).")
            conn.failures = 0
            return
        self._specs[name] = []
        if status != "failed" or self._closed:
            return
        first = conn.failures == 0
        conn.failures += 1
        conn.retry_at = time.monotonic() + min(BACKOFF_FIRST_S * 2 ** (conn.failures - 1), BACKOFF_MAX_S)
        verb = "stopped" if before == "ready" else "could not start"
        log.warning("MCP server %s (%s) %s: %s", name, origin, verb, conn.error)
        if conn.hopeless:  # no restart makes a missing command appear
            conn.failures = MAX_RESTARTS + 1
            where = f"`command` in [mcp_servers.{name}]" if origin == "config" else "the editor's settings"
            self._notices.append(f"MCP server {name!r} ({origin}) could not start: {conn.error}. "
                                 f"Its tools are unavailable: install it or fix {where}, then "
                                 "start a new session.")
        elif conn.failures > MAX_RESTARTS:
            self._notices.append(f"MCP server {name!r} ({origin}) failed again ({conn.error}); "
                                 f"given up after {MAX_RESTARTS} restarts: fix it and start a new session.")
        elif first or before == "ready":
            self._notices.append(f"MCP server {name!r} ({origin}) {verb}: {conn.error}. Its tools "
                                 "are unavailable; it will be restarted.")

    def _restart_due(self) -> None:
        if self._portal is None or self._closed:
            return
        now = time.monotonic()
        for conn in self.conns.values():
            if conn.status == "failed" and conn.failures <= MAX_RESTARTS and now >= conn.retry_at:
                conn.retry_at = float("inf")  # scheduled once; a new failure sets it again
                self._portal.start_task_soon(self._restart, conn)

    async def _restart(self, conn: Connection) -> None:
        if conn.status == "failed" and not self._closed:
            await conn.run()
