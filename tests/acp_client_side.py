"""The editor's side of `tests.acp_harness.Editor`: the client methods an agent calls
(`fs/*` over unsaved buffers, `terminal/*` as real local processes, permission answers)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any


class ClientError(Exception):
    """Answer the agent's request with this JSON-RPC error: (code, message[, data])."""


NO_REPLY = object()
CANCELLED = {"outcome": {"outcome": "cancelled"}}
"""A handler's outcome meaning: do not answer (some clients never do)."""


class Terminal:
    """One `terminal/create`: a real process in its own group, output collected by a thread."""

    def __init__(self, params: dict[str, Any]) -> None:
        env = dict(os.environ)
        env.update({e["name"]: e["value"] for e in params.get("env") or ()})
        self.proc = subprocess.Popen(
            [params["command"], *(params.get("args") or ())], cwd=params.get("cwd"), env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.output = bytearray()
        self.released = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        while chunk := self.proc.stdout.read1(65536):
            self.output += chunk

    def status(self) -> dict[str, Any]:
        code = self.proc.returncode
        return {"exitCode": code if code is None or code >= 0 else None,
                "signal": signal.Signals(-code).name if code is not None and code < 0 else None}

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


class ClientSide:
    """Mixed into Editor: `_on_<method>` handlers, each (params, request id) -> result."""

    project: Path
    permission: Any
    delays: dict[str, float]

    def _on_fs_read_text_file(self, params: dict[str, Any], rid: Any) -> Any:
        path = params["path"]
        with self._cond:
            self.reads.append(path)
            self._cond.notify_all()
        if path in self.hang_reads:
            return NO_REPLY
        if path in self.buffers:
            text = self.buffers[path]
        else:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except FileNotFoundError:
                raise ClientError(-32002, f"Resource not found: {path}") from None
        if params.get("line") or params.get("limit"):
            lines = text.splitlines(keepends=True)
            start = max((params.get("line") or 1) - 1, 0)
            text = "".join(lines[start : start + params["limit"]] if params.get("limit") else lines[start:])
        return {"content": text}

    def _on_fs_write_text_file(self, params: dict[str, Any], rid: Any) -> Any:
        with self._cond:
            self.writes.append((params["path"], params["content"]))
            self.buffers[params["path"]] = params["content"]  # an unsaved buffer, disk untouched
        return {}

    def _on_terminal_create(self, params: dict[str, Any], rid: Any) -> Any:
        terminal_id = f"term-{next(self._terminal_ids)}"
        with self._cond:
            self.terminals[terminal_id] = Terminal(params)
            self._cond.notify_all()
        return {"terminalId": terminal_id}

    def _terminal(self, params: dict[str, Any]) -> Terminal:
        term = self.terminals.get(params.get("terminalId", ""))
        if term is None or term.released:
            raise ClientError(-32002, "unknown terminal")
        return term

    def _on_terminal_output(self, params: dict[str, Any], rid: Any) -> Any:
        term = self._terminal(params)
        result = {"output": term.output.decode(errors="replace"), "truncated": False}
        if term.proc.poll() is not None:
            term._reader.join(2)
            result.update(output=term.output.decode(errors="replace"), exitStatus=term.status())
        return result

    def _on_terminal_wait_for_exit(self, params: dict[str, Any], rid: Any) -> Any:
        term = self._terminal(params)
        term.proc.wait()
        term._reader.join(2)
        return term.status()

    def _on_terminal_kill(self, params: dict[str, Any], rid: Any) -> Any:
        self._terminal(params).kill()
        return {}

    def _on_terminal_release(self, params: dict[str, Any], rid: Any) -> Any:
        term = self._terminal(params)
        term.kill()
        with self._cond:
            term.released = True
            self._cond.notify_all()
        return {}

    def _on_elicitation_create(self, params: dict[str, Any], rid: Any) -> Any:
        with self._cond:
            self.elicitations.append(params)
            self._cond.notify_all()
        answer = self.elicit(params) if self.elicit is not None else None
        return NO_REPLY if answer is None else answer

    def _on_session_request_permission(self, params: dict[str, Any], rid: Any) -> Any:
        with self._cond:
            self.permission_requests.append(params)
            self.pending_permissions[rid] = params
            self._cond.notify_all()
        policy = self.permission
        choice = policy(params) if callable(policy) else policy
        if choice is None:
            return NO_REPLY
        with self._cond:
            if self.pending_permissions.pop(rid, None) is None:
                return NO_REPLY  # already answered `cancelled`
        if choice == "cancelled":
            return CANCELLED
        if choice == "error":  # a client that cannot ask
            raise ClientError(-32603, "permission UI unavailable")
        return {"outcome": {"outcome": "selected", "optionId": choice}}
