"""Drive a real `talaria acp` process the way an editor does: raw JSON lines over pipes.

    with Editor(tmp_path, fake_llm) as ed:          # spawns the server, fake LLM on loopback
        ed.initialize()                              # fs + terminal advertised by default
        sid = ed.new_session()
        assert ed.prompt(sid, "hi")["stopReason"] == "end_turn"
        ed.updates(sid, "agent_message_chunk")

Every line, in both directions, goes through `tests.acpschema.Recorder` (the official ACP v1
schema per method); anything else on the agent's stdout (a print, a child's output) is a
problem too. Problems are collected by the reader thread and fail the test at `close()`.

The editor side is real: `fs/*` reads unsaved `buffers` (falling back to disk) and keeps
writes in `buffers` (the disk is left alone, as Zed's review does until accepted);
`terminal/*` runs real local processes in their own process groups; permission requests are
answered by `permission` (an option id, "cancelled", "error", a callable returning one of
those, or None to never answer).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests import ROOT
from tests.acp_client_side import CANCELLED, NO_REPLY, ClientError, ClientSide, Terminal
from tests.acpschema import AGENT_TO_CLIENT, CLIENT_TO_AGENT, Recorder, validate_message

SERVER_CMD = [sys.executable, "-m", "talaria.acp_server", "acp"]
TIMEOUT = 30.0
"""Seconds any single wait may take before the test fails (the fake LLM is instant; a wait
catches a hang, and the suite's parallel workers on a busy 2-core machine can make a start
or a turn take several seconds)."""
SCRUBBED_ENV = ("OPENAI_", "ANTHROPIC_", "OPENROUTER_", "TALARIA_")
Permission = str | Callable[[dict[str, Any]], str | None] | None


class AcpError(Exception):
    """An error response from the agent."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')} {error.get('message')}: {error.get('data')!r}")
        self.code: int = error.get("code", 0)
        self.message: str = error.get("message", "")
        self.data: Any = error.get("data")


def server_env(home: Path, llm: Any = None, *, credentials: bool = True, **extra: str) -> dict[str, str]:
    """The environment an editor would pass: a private TALARIA_HOME, the fake LLM's URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED_ENV)}
    env["PYTHONPATH"] = str(ROOT)
    env["TALARIA_HOME"] = str(home)
    if credentials and llm is not None:
        env.update(TALARIA_MODEL="openai:fake", OPENAI_API_KEY="x", OPENAI_BASE_URL=llm.openai_base_url)
    env.update(extra)
    return env


class Editor(ClientSide):
    """A scripted ACP client around one `talaria acp` subprocess (see the module docstring)."""

    def __init__(
        self, tmp: Path, llm: Any = None, *, project: Path | None = None, home: Path | None = None,
        permission: Permission = "allow_once", answer_cancelled: bool = True,
        credentials: bool = True, env: dict[str, str] | None = None, unstable: bool = False,
        command: list[str] | None = None,
    ) -> None:
        self.tmp = tmp
        self.llm = llm
        self.project = project or tmp / "project"
        self.project.mkdir(parents=True, exist_ok=True)
        self.home = home or tmp / "home"
        self.permission = permission
        self.answer_cancelled = answer_cancelled
        self.credentials = credentials
        self.extra_env = env or {}
        self.command = command or SERVER_CMD
        if llm is not None and llm.default_turn is None:
            llm.default_turn = {"text": "Done."}  # an exhausted script must not 500 into retries
        self.recorder = Recorder(unstable=unstable)  # unstable: the unstable ACP schema
        self.problems: list[str] = []
        self.buffers: dict[str, str] = {}
        self.hang_reads: set[str] = set()
        """Paths whose `fs/read_text_file` is never answered (a stuck or dumb client)."""
        self.delays: dict[str, float] = {}
        """Method -> seconds the editor takes to answer it (after doing the work)."""
        self.writes: list[tuple[str, str]] = []
        self.reads: list[str] = []
        self.terminals: dict[str, Terminal] = {}
        self.permission_requests: list[dict[str, Any]] = []
        self.elicitations: list[dict[str, Any]] = []
        self.elicit: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None
        """Answers `elicitation/create` (None from it, or no `elicit`: never answered)."""
        self.pending_permissions: dict[Any, dict[str, Any]] = {}
        self.stderr = bytearray()
        self._cond = threading.Condition()
        self._responses: dict[Any, dict[str, Any]] = {}
        self._raw_ids: dict[Any, Any] = {}
        """Ids of requests sent raw, and their methods (their answers are checked against them)."""
        self._ids = itertools.count(1)
        self._write_lock = threading.Lock()
        self._terminal_ids = itertools.count(1)
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    # -- process --------------------------------------------------------------------------

    def start(self) -> Editor:
        env = server_env(self.home, self.llm, credentials=self.credentials, **self.extra_env)
        self.proc = subprocess.Popen(
            self.command, cwd=self.project, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, bufsize=0,
        )
        self._stdout_reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._stdout_reader.start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        return self

    def __enter__(self) -> Editor:
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        code = self.close(check=exc_type is None)
        if exc_type is None and self.proc is not None and self.proc.returncode is not None:
            assert code == 0, f"the agent exited with {code} after its stdin closed"

    def close(self, *, check: bool = True, timeout: float = TIMEOUT) -> int | None:
        """Close stdin, wait for a clean exit, release terminals; fail on protocol problems."""
        code = None
        if self.proc is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()  # type: ignore[union-attr]
            try:
                code = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self.problems.append("the agent did not exit after its stdin closed")
            self._stdout_reader.join(timeout)  # every line it wrote is checked
        for term in self.terminals.values():
            term.kill()
        if check:
            self.check()
        return code

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def check(self) -> None:
        assert not self.problems, "protocol problems:\n" + "\n".join(self.problems) + \
            "\n--- agent stderr ---\n" + self.stderr.decode(errors="replace")[-3000:]

    # -- sending --------------------------------------------------------------------------

    def _write_line(self, data: bytes) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        with self._write_lock:
            self.proc.stdin.write(data)

    def _send(self, msg: dict[str, Any]) -> None:
        line = json.dumps(msg, ensure_ascii=False)
        with self._cond:
            self.recorder.record(CLIENT_TO_AGENT, msg)
        self._write_line(line.encode() + b"\n")

    def send(self, method: str, params: dict[str, Any] | None = None) -> int:
        """Send a request without waiting; returns its id (see `response`)."""
        request_id = next(self._ids)
        self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}})
        return request_id

    def send_raw(self, data: bytes | dict[str, Any]) -> Any:
        """Send bytes (or a message) unvalidated: abuse tests. A dict's id is returned."""
        request_id = None
        if isinstance(data, dict):
            request_id = data.get("id")
            with self._cond:
                self._raw_ids[request_id] = data.get("method")
            data = json.dumps(data).encode()
        self._write_line(data if data.endswith(b"\n") else data + b"\n")
        return request_id

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def response(self, request_id: Any, timeout: float = TIMEOUT) -> dict[str, Any]:
        """The whole response message to `request_id` (waits for it)."""
        with self._cond:
            if not self._cond.wait_for(lambda: request_id in self._responses, timeout):
                raise AssertionError(f"no response to request {request_id} within {timeout} s"
                                     f"\n--- agent stderr ---\n{self.stderr.decode(errors='replace')[-3000:]}")
            return self._responses[request_id]

    def result(self, request_id: Any, timeout: float = TIMEOUT) -> Any:
        msg = self.response(request_id, timeout)
        if "error" in msg:
            raise AcpError(msg["error"])
        return msg["result"]

    def request(self, method: str, params: dict[str, Any] | None = None, timeout: float = TIMEOUT) -> Any:
        return self.result(self.send(method, params), timeout)

    def error(self, method: str, params: dict[str, Any] | None = None) -> AcpError:
        """Send a request that must fail; return its error."""
        msg = self.response(self.send(method, params))
        assert "error" in msg, f"{method} succeeded: {msg}"
        return AcpError(msg["error"])

    # -- ACP conveniences -----------------------------------------------------------------

    def initialize(self, *, fs: bool = True, terminal: bool = True, version: int = 1,
                   **extra: Any) -> dict[str, Any]:
        """`extra`: more client capabilities, e.g. elicitation={"form": {}}."""
        caps = {"fs": {"readTextFile": fs, "writeTextFile": fs}, "terminal": terminal, **extra}
        return self.request("initialize", {
            "protocolVersion": version, "clientCapabilities": caps,
            "clientInfo": {"name": "acp-harness", "version": "1.0"},
        })

    def new_session(self, cwd: Path | None = None) -> str:
        result = self.request("session/new", {"cwd": str(cwd or self.project), "mcpServers": []})
        return result["sessionId"]

    def prompt(self, session_id: str, *blocks: str | dict[str, Any], timeout: float = TIMEOUT) -> dict[str, Any]:
        return self.result(self.send_prompt(session_id, *blocks), timeout)

    def send_prompt(self, session_id: str, *blocks: str | dict[str, Any]) -> int:
        content = [{"type": "text", "text": b} if isinstance(b, str) else b for b in blocks]
        return self.send("session/prompt", {"sessionId": session_id, "prompt": content})

    def cancel(self, session_id: str) -> None:
        self.notify("session/cancel", {"sessionId": session_id})
        if self.answer_cancelled:  # what the spec asks of clients
            with self._cond:
                waiting = [rid for rid, p in self.pending_permissions.items() if p["sessionId"] == session_id]
                for rid in waiting:
                    del self.pending_permissions[rid]
            for rid in waiting:
                self._reply(rid, CANCELLED)

    def sync(self) -> None:
        """A round trip: everything the agent wrote before it is in the transcript."""
        self.request("session/list", {})

    # -- reading the transcript ------------------------------------------------------------

    def updates(self, session_id: str | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        with self._cond:
            return [m["params"]["update"] for m in self.recorder.messages(AGENT_TO_CLIENT, "session/update")
                    if (session_id is None or m["params"]["sessionId"] == session_id)
                    and (kind is None or m["params"]["update"]["sessionUpdate"] == kind)]

    def transcript(self) -> list[tuple[str, dict[str, Any]]]:
        with self._cond:
            return list(self.recorder.transcript)

    def wait_for(self, predicate: Callable[[], Any], timeout: float = TIMEOUT, what: str = "condition") -> Any:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not (value := predicate()):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {what}")
                self._cond.wait(min(left, 0.05))
            return value

    def tool_cards(self, session_id: str) -> dict[str, list[dict[str, Any]]]:
        """toolCallId -> its `tool_call` and `tool_call_update`s, in order."""
        cards: dict[str, list[dict[str, Any]]] = {}
        for u in self.updates(session_id):
            if u["sessionUpdate"] in ("tool_call", "tool_call_update"):
                cards.setdefault(u["toolCallId"], []).append(u)
        return cards

    # -- reader threads --------------------------------------------------------------------

    def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        while chunk := self.proc.stderr.read(65536):
            self.stderr += chunk

    def _read_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                self._problem(f"non-protocol output on stdout: {line[:200]!r}")
                continue
            if not line.endswith(b"\n"):
                self._problem(f"last line not terminated: {line[:200]!r}")
            with self._cond:
                try:
                    if isinstance(msg, dict) and "method" not in msg and msg.get("id") in self._raw_ids:
                        method = self._raw_ids[msg.get("id")]
                        validate_message(msg, AGENT_TO_CLIENT, {msg.get("id"): method} if
                                         isinstance(method, str) and "result" in msg else {})
                        self.recorder.transcript.append((AGENT_TO_CLIENT, msg))
                    else:
                        self.recorder.record(AGENT_TO_CLIENT, msg)
                except AssertionError as exc:
                    self.problems.append(f"{exc}\n  line: {line[:500]!r}")
                if isinstance(msg, dict) and "method" not in msg:
                    self._responses[msg.get("id")] = msg
                self._cond.notify_all()
            if isinstance(msg, dict) and "method" in msg and "id" in msg:
                threading.Thread(target=self._handle, args=(msg,), daemon=True).start()
        with self._cond:
            self._cond.notify_all()

    def _problem(self, text: str) -> None:
        with self._cond:
            self.problems.append(text)
            self._cond.notify_all()

    # -- the client's side of the protocol -------------------------------------------------

    def _reply(self, request_id: Any, result: Any = None, error: dict[str, Any] | None = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        msg.update({"error": error} if error is not None else {"result": result})
        with contextlib.suppress(OSError, ValueError):  # the agent may be gone
            self._send(msg)

    def _handle(self, msg: dict[str, Any]) -> None:
        method, params, rid = msg["method"], msg.get("params") or {}, msg["id"]
        handler = getattr(self, "_on_" + method.replace("/", "_"), None)
        if handler is None:
            return self._reply(rid, error={"code": -32601, "message": f"not a client method: {method}"})
        try:
            outcome = handler(params, rid)
        except ClientError as exc:
            error = {"code": exc.args[0], "message": exc.args[1]}
            if len(exc.args) > 2:  # the error's `data` (acpx: {"details": "Permission denied..."})
                error["data"] = exc.args[2]
            return self._reply(rid, error=error)
        time.sleep(self.delays.get(method, 0))
        if outcome is not NO_REPLY:
            self._reply(rid, outcome)
