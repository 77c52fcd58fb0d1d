"""Hostile input for `talaria lsp`, and a replay of it against fresh servers (issue 23).

`CASES`: named byte strings an editor (or anything else on the pipe) may write: broken
headers, lengths, bodies, shapes, and `talaria.*` commands with bad arguments. `replay`
spawns one server per case and position (the first frame, or after `initialize`), writes
the case, then a probe request, and sorts what happens:

    answered   the probe got its answer (and the case's own request its code, when it has one)
    exited     the server exited non-zero with one stderr line (what a length no stream has
               gets)
    hang       alive, and no answer to the probe within HANG_S
    crash      exited otherwise (a traceback, status 0 with input unread)
    wrong      answered, but a reply carries a traceback, an unexpected code, or stdout
               carries bytes that are not LSP frames

    python -m tests.lsp.hostile                                      # this tree
    TALARIA_HOSTILE_PYTHONPATH=/old/pkg python -m tests.lsp.hostile  # another tree, laid
                                                  # out as /old/pkg/talaria/{acp_server,...}

A measuring tool (no timing assertions in tests): the test suite's checks are in
test_lsp_frames.py and test_fuzz.py.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.acp_harness import server_env

try:
    from talaria.acp_server.lsp.frames import MAX_FRAME_BYTES
except ImportError:  # replaying against a tree from before frames.py: this tree's bound
    MAX_FRAME_BYTES = 256 * 1024 * 1024

HANG_S = 5.0
SERVER = [sys.executable, "-m", "talaria.acp_server", "lsp"]


def frame(message: Any) -> bytes:
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def request(msg_id: Any, method: str, params: Any = None, **extra: Any) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": msg_id, "method": method, **extra}
    if params is not None:
        message["params"] = params
    return message


def command(name: str, *arguments: Any, msg_id: int = 5) -> bytes:
    return frame(request(msg_id, "workspace/executeCommand",
                         {"command": name, "arguments": list(arguments)}))


def target(uri: str, range_: Any = None) -> dict[str, Any]:
    return {"uri": uri, "range": range_ if range_ is not None else {
        "start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}}


@dataclass(frozen=True)
class Case:
    name: str
    data: bytes
    code: int | None = None
    """The error code the case's own request (id 5) must get, when it has one."""
    exits: bool = False
    """The server must exit non-zero with one stderr line (no stream that long is sent)."""
    later_only: bool = False
    """Meaningful only after initialize (a command's arguments)."""
    says: str = ""
    """What the error message must name (the argument that is wrong)."""


def frame_cases(*, big: bool = True) -> list[Case]:
    """Frames (headers, lengths, bodies, shapes); `big`: with a body over MAX_FRAME_BYTES."""
    big_body = b'{"jsonrpc":"2.0","id":5,"method":"x","params":{"a":"'
    big_body += b"x" * (MAX_FRAME_BYTES + 1 - len(big_body) - 3) + b'"}}' if big else b""
    frames = [
        Case("length 100000000000", b"Content-Length: 100000000000\r\n\r\n{}", exits=True),
        Case("length 2 GiB", b"Content-Length: 2147483648\r\n\r\n{}", exits=True),
        Case("length of 23 digits", b"Content-Length: 99999999999999999999999\r\n\r\n{}", exits=True),
        *([Case("body over MAX_FRAME_BYTES", frame(big_body), code=-32600)] if big else []),
        Case("length -5", b"Content-Length: -5\r\n\r\n{}"),
        Case("length abc", b"Content-Length: abc\r\n\r\n{}"),
        Case("length empty", b"Content-Length: \r\n\r\n{}"),
        Case("length 1e3", b"Content-Length: 1e3\r\n\r\n{}"),
        Case("length +2", b"Content-Length: +2\r\n\r\n{}"),
        Case("length 0x2", b"Content-Length: 0x2\r\n\r\n{}"),
        Case("length 0", b"Content-Length: 0\r\n\r\n"),
        Case("length shorter than the body",
             b"Content-Length: 5\r\n\r\n" + json.dumps(request(5, "x")).encode()),
        Case("no length", b"Content-Type: application/vscode-jsonrpc\r\n\r\n{}"),
        Case("header line without a colon", b"hello\r\n\r\n{}"),
        Case("Content-Length without its colon", b"Content-Length 2\r\n\r\n{}"),
        Case("1 MiB header line", b"X-Big: " + b"a" * 1024 * 1024 + b"\r\nContent-Length: 2\r\n\r\n{}"),
        Case("1 MiB of bytes, no newline", b"a" * 1024 * 1024),
        Case("two different lengths", b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}"),
        # Found by the LSP fuzz (seed 31337): a broken length line glued before the next
        # frame's header; that frame is read, not swallowed.
        Case("a broken length before the next frame", b"Content-Type: x\r\n\r\nContent-Length: %d\r\n"),
        Case("two equal lengths", b"Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}"),
        Case("100 header lines", b"X: y\r\n" * 100 + b"Content-Length: 2\r\n\r\n{}"),
        Case("lowercase content-length", b"content-length: 2\r\n\r\n{}"),
        Case("no space after the colon", b"Content-Length:2\r\n\r\n{}"),
        Case("LF line ends", b"Content-Length: 2\n\n{}"),
        Case("header glued to garbage", b"garbage Content-Length: 2\r\n\r\n{}"),
        Case("blank lines only", b"\r\n\r\n\r\n"),
        Case("NUL bytes", b"\x00\x00\r\n\r\n"),
        Case("binary", bytes(range(256)) * 4),
        Case("body not JSON", frame(b"abc")),
        Case("body a list", frame(b"[1]")),
        Case("body a number", frame(b"5")),
        Case("body null", frame(b"null")),
        Case("body invalid UTF-8", frame(b'{"jsonrpc":"2.0","id":5,"method":"\xff"}')),
        Case("body nested 100000 deep", frame(b"[" * 100_000)),
        Case("request nested 1000 deep", frame(b'{"jsonrpc":"2.0","id":5,"method":"x","params":{"a":'
                                               + b"[" * 1000 + b"]" * 1000 + b"}}"), code=-32600),
        Case("request without jsonrpc", frame({"id": 5, "method": "shutdown"}), code=-32600),
        Case("request with params a string", frame(request(5, "shutdown", "x")), code=-32602),
        Case("request with method a number", frame(request(5, 5)), code=-32600),  # type: ignore[arg-type]
        Case("request with an object id", frame(request({"a": 1}, "shutdown"))),
        Case("request with id 1.5", frame(request(1.5, "shutdown"))),
        Case("an object with neither method nor result", frame({"jsonrpc": "2.0", "id": 5}), code=-32600),
        Case("a response to nothing", frame({"jsonrpc": "2.0", "id": 77, "result": 1})),
        Case("an unknown notification", frame({"jsonrpc": "2.0", "method": "x/y"})),
        Case("a nested jsonrpc object", frame(request(5, "textDocument/hover", {"x": {"jsonrpc": "2.0"}})),
             code=-32602, later_only=True),
        Case("codeAction with params null", frame({**request(5, "textDocument/codeAction"),
                                                          "params": None}), code=-32602, later_only=True),
    ]
    return frames


def command_cases(project: Path) -> list[Case]:
    """`talaria.*` commands with bad arguments; `project` gets `a.py`, a directory, a FIFO."""
    (project / "a.py").write_text("x = 1\ny = 2\n")
    (project / "dir").mkdir(exist_ok=True)
    fifo = project / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    a = f"file://{project}/a.py"
    ask = [  # (name, data, what the error must name)
        ("params null", frame({**request(5, "workspace/executeCommand"), "params": None}),
         "executeCommand needs params"),
        ("params a list", frame(request(5, "workspace/executeCommand", ["talaria.ask"])),
         "takes `params` as an object"),
        ("arguments an object", frame(request(5, "workspace/executeCommand", {
            "command": "talaria.ask", "arguments": {"a": 1}})), "`arguments` must be a list"),
        ("arguments a string", frame(request(5, "workspace/executeCommand", {
            "command": "talaria.ask", "arguments": "why"})), "`arguments` must be a list"),
        ("range a string", command("talaria.ask", "why", target(a, "0:0-1:0")), "`range` must be"),
        ("range huge", command("talaria.ask", "why", target(a, {
            "start": {"line": 0, "character": 0}, "end": {"line": 10**30, "character": 0}})),
         "`range.end.line`"),
        ("range reversed", command("talaria.ask", "why", target(a, {
            "start": {"line": 1, "character": 0}, "end": {"line": 0, "character": 0}})),
         "`range` ends"),
        ("range negative", command("talaria.ask", "why", target(a, {
            "start": {"line": -1, "character": 0}, "end": {"line": 0, "character": 0}})),
         "`range.start.line`"),
        ("range with floats", command("talaria.ask", "why", target(a, {
            "start": {"line": 0.5, "character": 0}, "end": {"line": 1, "character": 0}})),
         "`range.start.line`"),
        ("uri a directory", command("talaria.ask", "why", target(f"file://{project}/dir")),
         "`uri` names a directory"),
        ("uri a FIFO", command("talaria.ask", "why", target(f"file://{fifo}")), "`uri` names a FIFO"),
        ("uri /dev/zero", command("talaria.ask", "why", target("file:///dev/zero")),
         "`uri` names a device"),
        ("uri a missing file", command("talaria.ask", "why", target(f"file://{project}/nope.py")),
         "does not exist"),
        ("uri not a string", command("talaria.ask", "why", {"uri": 5, "range": target(a)["range"]}),
         "`uri` must be a string"),
        ("uri http", command("talaria.ask", "why", target("http://example.com/a.py")), "only file: URIs"),
        ("prompt a number", command("talaria.ask", 5), "must be the prompt"),
        ("no arguments", command("talaria.ask"), "needs a prompt"),
        ("fix on a FIFO", command("talaria.fix", target(f"file://{fifo}")), "`uri` names a FIFO"),
        ("fix with diagnostics a string", command("talaria.fix", {**target(a), "diagnostics": "x"}),
         "`diagnostics` must be"),
        ("explain on /dev/zero", command("talaria.explain", target("file:///dev/zero")),
         "`uri` names a device"),
        ("explain without a target", command("talaria.explain", "why"), "needs the code to work on"),
        ("unknown command", command("talaria.nope"), "unknown command"),
    ]
    return [Case(f"talaria.ask {n}" if not n.startswith(("fix", "explain", "unknown")) else n,
                 d, code=-32602, later_only=True, says=says) for n, d, says in ask]


def cases(project: Path) -> list[Case]:
    return frame_cases() + command_cases(project)


INITIALIZE = request(1, "initialize", {"processId": None, "rootUri": None, "capabilities": {}})
PROBE_FIRST = request(99, "initialize", {"processId": None, "rootUri": None, "capabilities": {}})
PROBE_LATER = request(99, "talaria/probe", {})  # params: pygls 2 drops a request without


def run_one(case: Case, later: bool, tmp: Path) -> tuple[str, str]:
    """(outcome, detail) of one case in a fresh server."""
    env = server_env(tmp / "home", None)
    if other := os.environ.get("TALARIA_HOSTILE_PYTHONPATH"):
        env["PYTHONPATH"] = f"{other}:{env['PYTHONPATH']}"
    proc = subprocess.Popen(SERVER, cwd=tmp / "project", env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    out = b""
    try:
        if later:
            proc.stdin.write(frame(INITIALIZE) + frame({"jsonrpc": "2.0", "method": "initialized",
                                                        "params": {}}))
        try:
            proc.stdin.write(case.data + frame(PROBE_LATER if later else PROBE_FIRST))
            proc.stdin.flush()
        except BrokenPipeError:
            pass
        deadline = time.monotonic() + HANG_S
        replies: dict[Any, dict[str, Any]] = {}
        wanted = {99} if case.code is None else {99, 5}
        while not wanted <= set(replies) and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(proc.stdout.fileno(), 1 << 20)
            if not chunk:
                break
            out += chunk
            try:
                replies = {_key(m.get("id")): m for m in parse(out, partial=True)}
            except ValueError as exc:
                return "wrong", str(exc)
        if wanted <= set(replies):
            return judge(case, replies, out)
        if 99 in replies:
            return "hang", "the probe was answered, the case's request (id 5) never"
        alive = proc.poll() is None
        proc.stdin.close()
        try:
            rc = proc.wait(timeout=HANG_S)
        except subprocess.TimeoutExpired:
            return "hang", "alive, no answer (and no exit at EOF)"
        if alive and not case.exits:
            return "hang", "alive, no answer (exits at EOF)"
        err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
        if case.exits and rc != 0 and "Traceback" not in err and len(err.splitlines()) == 1:
            return "exited", err[:160]
        return "crash", f"exit {rc}: {err[-300:]}"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _key(msg_id: Any) -> Any:
    return msg_id if isinstance(msg_id, int | str | None) else repr(msg_id)


def judge(case: Case, replies: dict[Any, dict[str, Any]], out: bytes) -> tuple[str, str]:
    if case.exits:
        return "wrong", "answered a length no stream has instead of exiting"
    if b"Traceback" in out or b"traceback" in out:
        return "wrong", "a reply carries a traceback"
    if case.code is not None:
        got = replies.get(5, {}).get("error", {}).get("code")
        if got != case.code:
            return "wrong", f"id 5 got {got}, not {case.code}: {str(replies.get(5))[:200]}"
    return "answered", ""


def parse(data: bytes, *, partial: bool = False) -> list[dict[str, Any]]:
    """The messages on `data`; ValueError on a byte that is not part of an LSP frame."""
    messages = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            if partial and len(head) < 200:
                break
            raise ValueError(f"stray bytes on stdout: {data[:200]!r}")
        headers = dict(line.split(b": ", 1) for line in head.split(b"\r\n") if b": " in line)
        if not headers or set(headers) - {b"Content-Length", b"Content-Type"}:
            raise ValueError(f"stray bytes on stdout: {head[:200]!r}")
        length = int(headers[b"Content-Length"])
        if len(rest) < length and partial:
            break
        messages.append(json.loads(rest[:length]))
        data = rest[length:]
    return messages


def replay(workers: int = 2) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "project").mkdir()
        runs = [(c, later) for c in cases(tmp / "project") for later in (False, True)
                if later or not c.later_only]
        with ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(lambda run: run_one(run[0], run[1], tmp), runs))
    counts: dict[str, int] = {}
    failures = []
    for (case, later), (outcome, detail) in zip(runs, results, strict=True):
        counts[outcome] = counts.get(outcome, 0) + 1
        if outcome not in ("answered", "exited"):
            failures.append(f"{outcome:8} {'later' if later else 'first'}  {case.name}: {detail}")
    return {"runs": len(runs), **counts, "failures": failures}


if __name__ == "__main__":
    report = replay()
    for line in report.pop("failures"):
        print(line)
    print(json.dumps(report))
