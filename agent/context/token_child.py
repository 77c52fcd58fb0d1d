"""Exact token counts from a child process, for an agent that serves other requests meanwhile.

Building tiktoken's cl100k tables (`CoreBPE::new`, in Rust) holds the GIL for 60-90 ms in one
step: in any thread of `talaria acp`, that stalls every other request for as long (issue 9:
nothing may block the event loop past 50 ms). A child process has a GIL of its own, and
keeps the tables' ~14 MB out of the agent's memory too: `tokens.count_with(TokenChild().count)`.

The child starts at the first exact count, builds the encoding from the bundled file (as
`tokens.encoding` does) and answers one request at a time on its pipes:

    request: 4-byte big-endian length + the text, UTF-8 (surrogates passed through)
    answer:  4-byte big-endian count, `tokens._count` of that text

It exits when its stdin closes (the agent ended or closed it); it carries the agent's marker
(`procs.child_env`), so the watchdog ends it even if the agent dies by `kill -9` mid-count.
If it cannot start or dies, `count` returns None and the caller counts in-process.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from typing import IO

log = logging.getLogger(__name__)

HEADER_BYTES = 4
"""Length and count prefix: a text up to 4 GiB, far past `tokens.EXACT_LIMIT`."""
NICENESS = 10
"""The child's CPU priority below the agent's: counting 1 MB takes it up to 0.6 s of CPU, and
on a busy machine the agent's event loop, which answers the editor, should get the CPU first."""


class TokenChild:
    """The child process, started on the first `count`; thread-safe (one request at a time)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._failed = False

    def count(self, text: str) -> int | None:
        """`tokens._count(text)`, counted in the child; None if the child is not available.
        Blocks for the answer (the first one waits for the child's start, ~0.3 s): call it
        from a worker thread."""
        data = text.encode("utf-8", "surrogatepass")
        with self._lock:
            if self._failed:
                return None
            try:
                proc = self._proc or self._start()
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(len(data).to_bytes(HEADER_BYTES, "big") + data)
                proc.stdin.flush()
                answer = _read_exactly(proc.stdout, HEADER_BYTES)
            except OSError as exc:
                log.warning("the token counter process failed (%s); counting in-process", exc)
                self._failed = True
                self._close()
                return None
        return int.from_bytes(answer, "big")

    def close(self) -> None:
        with self._lock:
            self._close()

    def _start(self) -> subprocess.Popen[bytes]:
        from talaria.tools import procs

        self._proc = subprocess.Popen(
            [sys.executable, "-m", "talaria.agent.context.token_child"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=procs.child_env(), close_fds=True)
        return self._proc

    def _close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.stdin is not None:
            proc.stdin.close()  # the child exits at EOF
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _read_exactly(stream: IO[bytes], size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise OSError("the token counter exited")
    return data


def main() -> None:
    """The child: answer counts until stdin closes."""
    from talaria.agent.context import tokens

    os.nice(NICENESS)
    tokens.encoding()  # built once, before the first request
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while len(header := stdin.read(HEADER_BYTES)) == HEADER_BYTES:
        text = stdin.read(int.from_bytes(header, "big")).decode("utf-8", "surrogatepass")
        try:
            found = tokens._count(text)
        except Exception:  # a text tiktoken refuses: the estimate, never no answer
            found = tokens.bound(text)
        stdout.write(found.to_bytes(HEADER_BYTES, "big"))
        stdout.flush()


if __name__ == "__main__":
    main()
