"""The client side of ACP `terminal/*`: real local processes, run the way an editor runs them.

Each terminal is `command args...` in its own process group (so `terminal/kill` reaches the
children it started), stdin from /dev/null, stdout and stderr merged. Only the last
`outputByteLimit` bytes are kept, cut at a UTF-8 character boundary as the spec requires.
A terminal lives until `terminal/release` (or the client's exit), even after its process ends:
the agent may still ask for its output.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.abc

from talaria.acp_server.jsonrpc import JsonObject, RpcError

DEFAULT_OUTPUT_LIMIT = 10 * 1024 * 1024
"""Bytes kept when the agent gives no `outputByteLimit`: output is bounded either way."""
KILL_GRACE = 1.0
"""Seconds between SIGTERM and SIGKILL of a terminal's process group."""
DRAIN = 0.5
"""After the process exits, how long its output may keep arriving (a child holding the pipe)."""
READ_CHUNK = 65536


class LocalTerminal:
    """One `terminal/create`: the process, its bounded output, its exit."""

    def __init__(self, proc: anyio.abc.Process, limit: int) -> None:
        self.proc, self.limit = proc, limit
        self.output = bytearray()
        self.truncated = False
        self.exited = anyio.Event()
        self.eof = anyio.Event()
        self.scope = anyio.CancelScope()

    def feed(self, chunk: bytes) -> None:
        self.output += chunk
        if len(self.output) > 2 * self.limit + READ_CHUNK:  # trim rarely, not on every chunk
            self._trim()

    def text(self) -> str:
        self._trim()
        return self.output.decode("utf-8", "replace")

    def _trim(self) -> None:
        if len(self.output) > self.limit:
            cut = len(self.output) - self.limit
            while cut < len(self.output) and self.output[cut] & 0xC0 == 0x80:
                cut += 1  # never start inside a multi-byte character
            del self.output[:cut]
            self.truncated = True

    def exit_status(self) -> JsonObject | None:
        code = self.proc.returncode
        if not self.exited.is_set() or code is None:
            return None
        if code < 0:
            with contextlib.suppress(ValueError):
                return {"exitCode": None, "signal": signal.Signals(-code).name}
            return {"exitCode": None, "signal": str(-code)}
        return {"exitCode": code, "signal": None}

    async def watch(self) -> None:
        """Collect output and wait for the exit; runs until released."""

        async def pump() -> None:
            assert self.proc.stdout is not None
            with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError,
                                     anyio.BrokenResourceError):
                while True:
                    self.feed(await self.proc.stdout.receive(READ_CHUNK))
            self.eof.set()

        with self.scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(pump)
                await self.proc.wait()
                self.exited.set()

    async def kill(self) -> None:
        """SIGTERM the process group, SIGKILL it after KILL_GRACE (stragglers included)."""
        if not self.exited.is_set():
            _signal_group(self.proc.pid, signal.SIGTERM)
            with anyio.move_on_after(KILL_GRACE):
                await self.exited.wait()
        _signal_group(self.proc.pid, signal.SIGKILL)
        with anyio.move_on_after(KILL_GRACE):
            await self.exited.wait()


class LocalTerminals:
    """`terminal/*` handlers; processes are watched in `tg`, the client's task group."""

    def __init__(self, tg: anyio.abc.TaskGroup, default_cwd: Callable[[str], Path]) -> None:
        self._tg, self._default_cwd = tg, default_cwd
        self._terminals: dict[str, LocalTerminal] = {}
        self._ids = itertools.count(1)

    async def create(self, params: JsonObject) -> JsonObject:
        command = params.get("command")
        if not isinstance(command, str) or not command:
            raise RpcError.invalid_params("`command` must be a non-empty string")
        args = [str(a) for a in params.get("args") or ()]
        env = dict(os.environ)
        env.update({str(e["name"]): str(e["value"]) for e in params.get("env") or ()
                    if isinstance(e, dict) and "name" in e and "value" in e})
        cwd = params.get("cwd") or self._default_cwd(str(params.get("sessionId", "")))
        limit = params.get("outputByteLimit")
        limit = DEFAULT_OUTPUT_LIMIT if not isinstance(limit, int) or limit < 0 else limit
        try:
            proc = await anyio.open_process(
                [command, *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
            )
        except OSError as exc:
            raise RpcError.internal(f"cannot run {command}: {exc.strerror or exc}") from None
        terminal_id = f"term-{next(self._ids)}"
        terminal = self._terminals[terminal_id] = LocalTerminal(proc, limit)
        self._tg.start_soon(terminal.watch, name=f"terminal {terminal_id}")
        return {"terminalId": terminal_id}

    async def output(self, params: JsonObject) -> JsonObject:
        terminal = self._get(params)
        result: JsonObject = {
            "output": terminal.text(), "truncated": terminal.truncated,
        }
        if (status := terminal.exit_status()) is not None:
            result["exitStatus"] = status
        return result

    async def wait_for_exit(self, params: JsonObject) -> JsonObject:
        terminal = self._get(params)
        await terminal.exited.wait()
        with anyio.move_on_after(DRAIN):  # so that a following terminal/output is complete
            await terminal.eof.wait()
        return terminal.exit_status() or {"exitCode": None, "signal": None}

    async def kill(self, params: JsonObject) -> JsonObject:
        await self._get(params).kill()
        return {}

    async def release(self, params: JsonObject) -> JsonObject:
        terminal = self._get(params)
        del self._terminals[str(params["terminalId"])]
        await self._discard(terminal)
        return {}

    async def close_all(self) -> None:
        """Kill and forget every terminal the agent did not release."""
        terminals, self._terminals = list(self._terminals.values()), {}
        for terminal in terminals:
            await self._discard(terminal)

    @property
    def open_ids(self) -> list[str]:
        return list(self._terminals)

    async def _discard(self, terminal: LocalTerminal) -> None:
        with anyio.CancelScope(shield=True):
            await terminal.kill()
            terminal.scope.cancel()
            with contextlib.suppress(Exception):
                await terminal.proc.aclose()

    def _get(self, params: JsonObject) -> LocalTerminal:
        terminal = self._terminals.get(params.get("terminalId"))  # type: ignore[arg-type]
        if terminal is None:
            raise RpcError.resource_not_found(f"unknown terminal {params.get('terminalId')!r}")
        return terminal


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(OSError):  # the group is gone already
        os.killpg(pgid, sig)
