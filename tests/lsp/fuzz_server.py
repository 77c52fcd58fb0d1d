"""One long-running `talaria lsp` for the LSP fuzz test, and the checks on all it writes.

    server = FuzzServer(tmp_path, fake_llm)    # spawned as editors do; restarted after a crash
    server.send(data)                          # raw bytes
    server.answer(request_id, timeout)         # the response to an id, None if none came
    server.null_answers()                      # responses with id null since the last call
    server.problems                            # stdout bytes that were not LSP frames

Every byte on stdout must belong to a frame `Content-Length: N\\r\\n[Content-Type: ...\\r\\n]
\\r\\n` + N bytes of one JSON object. The server's own requests (applyEdit, showMessageRequest,
progress) are answered as a plain editor would.
"""

from __future__ import annotations

import collections
import contextlib
import json
import subprocess
import threading
from pathlib import Path
from typing import Any

from tests.acp_harness import server_env
from tests.lsp.lsp_editor import SERVER_CMD

ANSWERS = {"workspace/applyEdit": {"applied": True}, "window/showMessageRequest": None,
           "window/workDoneProgress/create": None, "window/showDocument": {"success": True}}
"""What the fuzzing editor answers to the server's requests."""


def key(msg_id: Any) -> Any:
    """A hashable key for any id (the server must echo ids exactly)."""
    return json.dumps(msg_id, sort_keys=True)


class FuzzServer:
    def __init__(self, tmp: Path, llm: Any) -> None:
        self.project = tmp / "project"
        self.project.mkdir(exist_ok=True)
        self.env = server_env(tmp / "home", llm)
        self.problems: list[str] = []
        self.restarts = 0
        self.stderr = bytearray()
        self._cond = threading.Condition()
        self._writing = threading.Lock()  # the reading thread answers the server's requests
        self._answers: dict[Any, list[dict[str, Any]]] = {}
        self._nulls: collections.deque[dict[str, Any]] = collections.deque()
        self._start()

    def _start(self) -> None:
        self.proc = subprocess.Popen(
            SERVER_CMD, cwd=self.project, env=self.env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()
        threading.Thread(target=self._drain, args=(self.proc,), daemon=True).start()

    def restart(self) -> None:
        self.close()
        self.restarts += 1
        with self._cond:
            self._answers.clear()
            self._nulls.clear()
        self._start()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        try:
            with self._writing:
                self.proc.stdin.write(data)
        except (BrokenPipeError, OSError):
            pass  # it died: the caller sees it by alive()

    def request(self, msg_id: Any, method: str, params: Any, timeout: float) -> dict[str, Any] | None:
        body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        self.send(b"Content-Length: %d\r\n\r\n%s" % (len(body), body.encode()))
        return self.answer(msg_id, timeout)

    def answer(self, msg_id: Any, timeout: float) -> dict[str, Any] | None:
        """The first response to `msg_id` (taken: a second one stays, for `unclaimed`)."""
        with self._cond:
            self._cond.wait_for(lambda: self._answers.get(key(msg_id)) or not self.alive(),
                                timeout)
            found = self._answers.get(key(msg_id))
            return found.pop(0) if found else None

    def null_answers(self) -> list[dict[str, Any]]:
        with self._cond:
            taken = list(self._nulls)
            self._nulls.clear()
            return taken

    def unclaimed(self) -> list[dict[str, Any]]:
        """Responses nobody waited for (an answered notification, a second answer)."""
        with self._cond:
            stray = [m for found in self._answers.values() for m in found]
            self._answers.clear()
            return stray

    def close(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    # -- reading ----------------------------------------------------------------------------

    def _drain(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        while chunk := proc.stderr.read(65536):
            self.stderr += chunk
            del self.stderr[:-20000]

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        buf = b""
        while chunk := proc.stdout.read(1 << 20):  # bufsize=0: what is there
            buf += chunk
            while (message := self._take(buf)) is not None:
                buf, value = message
                if value is not None:
                    self._route(value)
        with self._cond:
            self._cond.notify_all()

    def _take(self, buf: bytes) -> tuple[bytes, dict[str, Any] | None] | None:
        """(rest, message) of one complete frame at the start of `buf`; None: incomplete."""
        head, sep, rest = buf.partition(b"\r\n\r\n")
        if not sep:
            if len(head) > 200 or (head and not b"Content-Length".startswith(head[:14])):
                self.problems.append(f"stray bytes on stdout: {head[:200]!r}")
                return b"", None
            return None
        lines = head.split(b"\r\n")
        headers = dict(line.split(b": ", 1) for line in lines if b": " in line)
        if len(headers) != len(lines) or set(headers) - {b"Content-Length", b"Content-Type"} \
                or not headers.get(b"Content-Length", b"").isdigit():
            self.problems.append(f"not an LSP header on stdout: {head[:200]!r}")
            return rest, None
        length = int(headers[b"Content-Length"])
        if len(rest) < length:
            return None
        try:
            value = json.loads(rest[:length])
        except ValueError:
            self.problems.append(f"a frame that is not JSON: {rest[:200]!r}")
            return rest[length:], None
        if not isinstance(value, dict) or value.get("jsonrpc") != "2.0":
            self.problems.append(f"not a JSON-RPC message: {rest[:200]!r}")
            return rest[length:], None
        return rest[length:], value

    def _route(self, message: dict[str, Any]) -> None:
        if "method" in message:
            if "id" in message:  # the server asks: answer as an editor would
                method = message["method"]
                reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
                if method in ANSWERS:
                    reply["result"] = ANSWERS[method]
                else:
                    reply["error"] = {"code": -32601, "message": f"no {method}"}
                self.send(_frame(reply))
            return
        if "error" in message and not isinstance(message["error"], dict):
            self.problems.append(f"an error that is not an object: {message}")
        with self._cond:
            if message.get("id") is None:
                self._nulls.append(message)
            else:
                self._answers.setdefault(key(message["id"]), []).append(message)
            self._cond.notify_all()


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
