"""One long-running `talaria acp` for the protocol fuzz test, and the checks on all it writes.

    agent = FuzzAgent(tmp_path, fake_llm)     # spawned as editors do; restarted after a crash
    agent.send(line)                          # raw bytes, newline added
    agent.answer(request_id, timeout)         # the response to an id (None: the next id-null one)
    agent.problems                            # every stdout line that was not valid protocol

Every stdout line must be one UTF-8 JSON object valid against the official ACP v1 schema:
responses by their method's response definition (or `Error`), the agent's own requests and
notifications by theirs. The agent's requests to the client (a prompt may read a file through
the editor) get a -32601, as a client that implements nothing would answer, unless
`agent.replies[method](request)` gives the line to answer with (bytes: sent as they are).

    agent.log_problems()                      # ERROR lines and tracebacks in stderr and the log
"""

from __future__ import annotations

import collections
import json
import re
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.acp_harness import SERVER_CMD, server_env
from tests.acpschema import AGENT_TO_CLIENT, CLIENT_TO_AGENT, check, method_defs, validate_message

JSON_RPC_CODES = {-32700, -32600, -32601, -32602, -32603, -32800}
ACP_CODES = {-32000, -32002}
TALARIA_CODES = {-32050}
NULL = object()
"""Key of answers with `"id": null` (they are matched in order)."""
LOG_PROBLEM = re.compile(r"^talaria: error: .*$|^\S+ \S+ ERROR .*$|^Traceback.*$", re.MULTILINE)
"""An ERROR line (stderr's one-line form or the log file's) or a traceback."""


class FuzzAgent:
    def __init__(self, tmp: Path, llm: Any) -> None:
        self.project = tmp / "project"
        self.project.mkdir(exist_ok=True)
        self.env = server_env(tmp / "home", llm)
        self.problems: list[str] = []
        self.restarts = 0
        self._cond = threading.Condition()
        self._answers: dict[Any, dict[str, Any]] = {}
        self._null_answers: collections.deque[dict[str, Any]] = collections.deque()
        self._methods: dict[Any, str] = {}
        self.stderr = bytearray()
        self.replies: dict[str, Callable[[dict[str, Any]], bytes]] = {}
        """Method -> the answer line to the agent's request of it (default: -32601)."""
        self.log_file = tmp / "home" / "logs" / "talaria.log"
        self._start()

    def _start(self) -> None:
        self.proc = subprocess.Popen(
            SERVER_CMD, cwd=self.project, env=self.env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
        )
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()
        threading.Thread(target=self._drain, args=(self.proc,), daemon=True).start()

    def restart(self) -> None:
        self.close()
        self.restarts += 1
        self._start()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()

    # -- sending ----------------------------------------------------------------------------

    def send(self, line: bytes, method: str | None = None, request_id: Any = NULL) -> bool:
        """Write one line; `method` and `request_id` let the answer's result be validated."""
        if method is not None and request_id is not NULL:
            with self._cond:
                self._methods[_key(request_id)] = method
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(line + b"\n")
            return True
        except (BrokenPipeError, OSError):
            return False

    def request(self, method: str, params: dict[str, Any], request_id: str) -> dict[str, Any]:
        """A well-formed request and its answer (setup and sentinels)."""
        msg = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        self.send(json.dumps(msg).encode(), method, request_id)
        answer = self.answer(request_id, 30)
        assert answer is not None, f"no answer to {method}"
        return answer

    def answer(self, request_id: Any, timeout: float) -> dict[str, Any] | None:
        """The response to `request_id` (NULL: the oldest unclaimed `"id": null` one), or None."""
        def ready() -> bool:
            return bool(self._null_answers) if request_id is NULL else _key(request_id) in self._answers

        with self._cond:
            if not self._cond.wait_for(lambda: ready() or not self.alive(), timeout) or not ready():
                return None
            if request_id is NULL:
                return self._null_answers.popleft()
            return self._answers.pop(_key(request_id))

    def log_problems(self) -> list[str]:
        """ERROR lines and tracebacks the agent wrote, to stderr and to its log file."""
        text = bytes(self.stderr).decode(errors="replace")
        if self.log_file.exists():
            text += "\n" + self.log_file.read_text(errors="replace")
        return LOG_PROBLEM.findall(text)

    def unclaimed(self) -> list[dict[str, Any]]:
        """Answers nobody waited for (e.g. to a notification), removed as they are returned."""
        with self._cond:
            found = [*self._answers.values(), *self._null_answers]
            self._answers.clear()
            self._null_answers.clear()
            return found

    # -- reading ----------------------------------------------------------------------------

    def _drain(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        while chunk := proc.stderr.read(65536):
            self.stderr += chunk
            del self.stderr[:-20_000]

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            msg = self._check_line(line)
            if msg is None:
                continue
            if "method" in msg:
                if "id" in msg and (answer := self.replies.get(msg["method"])) is not None:
                    self.send(answer(msg))
                elif "id" in msg:  # the agent asks the client: answer as a client with nothing
                    reply = {"jsonrpc": "2.0", "id": msg["id"],
                             "error": {"code": -32601, "message": "Method not found"}}
                    self.send(json.dumps(reply).encode())
                continue
            with self._cond:
                if msg.get("id") is None:
                    self._null_answers.append(msg)
                else:
                    self._answers[_key(msg["id"])] = msg
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _check_line(self, line: bytes) -> dict[str, Any] | None:
        try:
            if not line.endswith(b"\n"):
                raise ValueError("the last line is not terminated")
            msg = json.loads(line.decode("utf-8"))
            if not isinstance(msg, dict):
                raise ValueError("not a JSON object")
            if "method" in msg:
                validate_message(msg, AGENT_TO_CLIENT, {})
                return msg
            if ("result" in msg) == ("error" in msg):
                raise ValueError("a response needs exactly one of result and error")
            check("RequestId", msg.get("id"), where="id")
            with self._cond:
                method = self._methods.pop(_key(msg.get("id")), None)
            if "error" in msg:
                check("Error", msg["error"], where="error")
            else:
                defs = method_defs(method, CLIENT_TO_AGENT) if method else None
                if defs and "response" in defs:
                    check(defs["response"], msg["result"], where=f"{method} result")
            return msg
        except (ValueError, AssertionError) as exc:
            with self._cond:
                self.problems.append(f"{exc}\n  line: {line[:300]!r}")
            return None


def _key(request_id: Any) -> Any:
    # 1 and "1" and True are different ids; JSON-equal values must map to one key.
    return (type(request_id).__name__, json.dumps(request_id, sort_keys=True))
