"""`talaria lsp` over raw pipes: stdout carries LSP frames and nothing else (a command's
output goes to stderr), the server exits on shutdown/exit and on EOF, and `talaria lsp
--stdio` (what many clients pass) starts the same server."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.acp_harness import server_env
from tests.fakellm import FakeLLM
from tests.lsp.lsp_editor import SERVER_CMD, TIMEOUT
from tests.lsp.test_lsp_door import call


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def frames(data: bytes) -> list[dict[str, Any]]:
    """Every message on `data`; fails on any byte that is not part of an LSP frame."""
    messages = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        assert sep, f"stray bytes on stdout: {data[:200]!r}"
        headers = dict(line.split(b": ", 1) for line in head.split(b"\r\n"))
        assert set(headers) <= {b"Content-Length", b"Content-Type"}, f"stray bytes: {head[:200]!r}"
        length = int(headers[b"Content-Length"])
        messages.append(json.loads(rest[:length]))
        data = rest[length:]
    return messages


class RawClient:
    """Writes requests, answers the server's requests as an allowing editor would."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.out = b""
        self.answered: set[Any] = set()

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(frame(message))
        self.proc.stdin.flush()

    def until_response(self, msg_id: int) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            # What came with an earlier answer first: two replies can arrive in one read.
            for message in self.complete():
                if message.get("id") == msg_id and "method" not in message:
                    return message
                if "method" in message and "id" in message and message["id"] not in self.answered:
                    self.answered.add(message["id"])
                    self.send({"jsonrpc": "2.0", "id": message["id"], "result": answer(message)})
            ready, _, _ = select.select([fd], [], [], TIMEOUT)
            assert ready, "no answer from talaria lsp"
            chunk = os.read(fd, 65536)
            assert chunk, "talaria lsp closed stdout"
            self.out += chunk

    def complete(self) -> list[dict[str, Any]]:
        """The messages fully received so far (parsing the whole stream each time)."""
        data, done = self.out, b""
        while b"\r\n\r\n" in data:
            head, _, rest = data.partition(b"\r\n\r\n")
            length = int(dict(line.split(b": ", 1) for line in head.split(b"\r\n"))[b"Content-Length"])
            if len(rest) < length:
                break
            done += head + b"\r\n\r\n" + rest[:length]
            data = rest[length:]
        return frames(done)


def answer(request: dict[str, Any]) -> Any:
    return {"window/showMessageRequest": {"title": "Allow once"},
            "workspace/applyEdit": {"applied": True}}.get(request["method"])


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "processId": None, "rootUri": None, "capabilities": {"window": {"showMessage": {}}}}}


def spawn(tmp_path: Path, llm: FakeLLM | None, *args: str,
          pythonpath: Path | None = None) -> subprocess.Popen[bytes]:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    env = server_env(tmp_path / "home", llm)
    if pythonpath is not None:
        env["PYTHONPATH"] = f"{pythonpath}:{env['PYTHONPATH']}"
    return subprocess.Popen([*SERVER_CMD, *args], cwd=project, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def test_stdout_carries_only_lsp_frames(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script([
        {"tool_calls": [call("terminal", command="echo STRAY-FROM-A-CHILD; echo more >&1")]},
        {"text": "Ran it."},
    ])
    fake_llm.default_turn = {"text": "Done."}
    # A library that prints (and writes to fd 1) once the server runs: here, at exit.
    (tmp_path / "site").mkdir()
    (tmp_path / "site/sitecustomize.py").write_text(
        "import atexit, os\n"
        "atexit.register(lambda: (print('STRAY-PRINT', flush=True), os.write(1, b'STRAY-FD1')))\n")
    proc = spawn(tmp_path, fake_llm, pythonpath=tmp_path / "site")
    client = RawClient(proc)
    client.send(INITIALIZE)
    assert client.until_response(1)["result"]["serverInfo"]["name"] == "talaria"
    client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    client.send({"jsonrpc": "2.0", "id": 2, "method": "workspace/executeCommand",
                 "params": {"command": "talaria.ask", "arguments": ["Run it"]}})
    result = client.until_response(2)["result"]
    client.send({"jsonrpc": "2.0", "id": 3, "method": "shutdown"})
    assert client.until_response(3)["result"] is None
    client.send({"jsonrpc": "2.0", "method": "exit"})
    rest, stderr = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, stderr.decode()
    messages = frames(client.out + rest)  # every byte of stdout is a frame
    assert result["answer"] == "Ran it."
    assert b"STRAY-PRINT" in stderr and b"STRAY-FD1" in stderr
    assert "STRAY-FROM-A-CHILD" in json.dumps(fake_llm.requests[1]["json"]["messages"][-1])
    assert all(m.get("jsonrpc") == "2.0" for m in messages)


@pytest.mark.parametrize("args", [(), ("--stdio",)])
def test_the_server_exits_when_the_editor_goes_away(tmp_path: Path, args: tuple[str, ...]) -> None:
    proc = spawn(tmp_path, None, *args)
    client = RawClient(proc)
    client.send(INITIALIZE)
    assert "capabilities" in client.until_response(1)["result"]
    assert proc.stdin is not None
    proc.stdin.close()  # the editor crashed: EOF, no shutdown
    proc.wait(timeout=TIMEOUT)
    assert proc.stderr is not None and b"Traceback" not in proc.stderr.read()


def test_talaria_lsp_is_in_the_help() -> None:
    out = subprocess.run([sys.executable, "-m", "talaria.acp_server", "--help"],
                         capture_output=True, text=True, env=server_env(Path("/nonexistent"), None),
                         check=True).stdout
    assert "lsp" in out and "Language Server Protocol" in out
