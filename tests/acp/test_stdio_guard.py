"""Only protocol bytes reach the real stdout; stray output and children cannot touch the wire.

Each test runs a real Python process that calls `protect_stdio()` and then misbehaves.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests import ROOT

PROJECT_ROOT = ROOT


def run_guarded(
    body: str, stdin: bytes = b"", timeout: float = 10
) -> subprocess.CompletedProcess[bytes]:
    script = (
        "import os, subprocess, sys\nimport anyio\nfrom talaria.acp_server.stdio import protect_stdio\n"
    )
    script += textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", script],
        input=stdin,
        capture_output=True,
        cwd=PROJECT_ROOT,
        timeout=timeout,
        check=True,
    )


def test_stray_output_goes_to_stderr_and_only_protocol_reaches_stdout() -> None:
    done = run_guarded(
        """
        streams = protect_stdio()
        print("junk from print")
        sys.stdout.write("junk from sys.stdout\\n")
        os.system("echo child-junk")
        subprocess.run(["sh", "-c", "echo grandchild-junk; echo to-fd-1 >&1"])

        async def main():
            await streams.writer.send(b'{"jsonrpc":"2.0","method":"x","params":{}}\\n')

        anyio.run(main)
        print("more junk at exit")
        """
    )
    assert done.stdout == b'{"jsonrpc":"2.0","method":"x","params":{}}\n'
    for junk in (
        b"junk from print",
        b"junk from sys.stdout",
        b"child-junk",
        b"grandchild-junk",
        b"to-fd-1",
    ):
        assert junk in done.stderr


def test_children_inherit_neither_the_protocol_output_nor_the_protocol_input() -> None:
    done = run_guarded(
        """
        streams = protect_stdio()
        fd = streams.writer._fd
        # A child that tries the private fd directly: it is close-on-exec, so EBADF.
        subprocess.run([sys.executable, "-c", f"import os; os.write({fd}, b'leak\\\\n')"])
        # A child that reads stdin gets /dev/null, not the editor's messages.
        child = subprocess.run(["cat"], capture_output=True)
        print("cat read", len(child.stdout), "bytes", file=sys.stderr)

        async def main():
            data = await streams.reader.receive()  # the protocol input is all still there
            await streams.writer.send(data)

        anyio.run(main)
        """,
        stdin=b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n',
    )
    assert done.stdout == b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n'
    assert b"cat read 0 bytes" in done.stderr
    assert b"Bad file descriptor" in done.stderr


def test_a_peer_on_guarded_stdio_answers_and_exits_at_eof() -> None:
    done = run_guarded(
        """
        from talaria.acp_server.jsonrpc import Peer

        async def main():
            peer = Peer(*protect_stdio())

            async def initialize(params):
                print("handling initialize")  # must not corrupt the wire
                return {"protocolVersion": 1}

            peer.on_request("initialize", initialize)
            await peer.serve()
            print("served", file=sys.stderr)

        anyio.run(main)
        """,
        stdin=b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\nnot json\n',
    )
    # Order is not guaranteed: the parse error is answered inline, the request in a task.
    assert sorted(done.stdout.splitlines()) == [
        b'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}',
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error","data":"Expecting value: line 1 column 1 (char 0)"}}',
    ]
    assert b"handling initialize" in done.stderr and b"served" in done.stderr


def test_the_process_exits_even_while_stdin_stays_open() -> None:
    # The reader thread is a daemon: a loop that stops for another reason than EOF (a signal,
    # a fatal error) must not leave the process hanging on a blocked read of stdin.
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import anyio\nfrom talaria.acp_server.stdio import protect_stdio\n"
            "streams = protect_stdio()\n"
            "async def main():\n"
            "    with anyio.move_on_after(0.2):\n"
            "        await streams.reader.receive()\n"
            "anyio.run(main)\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=PROJECT_ROOT,
    )
    started = time.monotonic()
    try:
        assert process.wait(timeout=10) == 0
    finally:
        process.kill()
        process.communicate()
    assert time.monotonic() - started < 10


def test_logging_goes_to_stderr_and_the_log_file_never_to_stdout(tmp_path: Path) -> None:
    done = run_guarded(
        f"""
        import logging, warnings
        from pathlib import Path
        from talaria.acp_server.logs import setup_logging

        path = setup_logging(Path({str(tmp_path)!r}), "debug")
        setup_logging(Path({str(tmp_path)!r}), "DEBUG")  # twice: no duplicate lines
        logging.getLogger("talaria.agent.loop").debug("a debug line")
        warnings.warn("a warning")
        print(path, file=sys.stderr)
        """
    )
    log_file = tmp_path / "logs" / "talaria.log"
    assert done.stdout == b""
    assert done.stderr.count(b"talaria.agent.loop: a debug line") == 1
    assert str(log_file).encode() in done.stderr
    text = log_file.read_text(encoding="utf-8")
    assert text.count("DEBUG talaria.agent.loop: a debug line") == 1 and "a warning" in text
