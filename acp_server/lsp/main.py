"""Start `talaria lsp`: guard stdio, read the config, answer `initialize` at once, serve LSP.

lsprotocol's types take most of start-up to import, so they load in a thread while the main
thread reads the editor's first message: an `initialize` is answered from `capabilities.py`
straight away, then given to pygls like any message (pygls sets itself up from it; its own
reply is dropped). Anything else first goes to pygls untouched.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import sys
import threading
from typing import IO, Any

MAX_HEADER_LINES = 10
"""Header lines read before the first frame is given up on (LSP sends one or two)."""
INVALID_PARAMS = -32602


def main() -> int:
    from talaria.acp_server.logs import setup_logging
    from talaria.acp_server.stdio import protect_stdio_fds
    from talaria.agent.config import load_config

    protocol_in, protocol_out = protect_stdio_fds()
    loader = threading.Thread(target=_load_pygls, name="talaria-lsp-import", daemon=True)
    loader.start()
    try:
        config = load_config()
        explicit = config.sources.get("log_level") not in (None, "default")
        setup_logging(config.home, config.log_level if explicit else None)
        if not explicit or config.log_level.upper() != "DEBUG":
            # pygls logs every message body at INFO: the user's buffers do not go to the log.
            logging.getLogger("pygls").setLevel(logging.WARNING)
    except ValueError as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return 2
    with os.fdopen(protocol_in, "rb") as stdin, os.fdopen(protocol_out, "wb") as stdout:
        head, message = read_frame(stdin)
        answered = answer_initialize(message, stdout)
        loader.join()
        from talaria.acp_server.lsp.server import build_server
        from talaria.tools import procs

        procs.reap_orphans(config.home)
        server = build_server(config)
        server.protocol.answered = answered
        server.start_io(Replayed(head, stdin), stdout)  # type: ignore[arg-type]
    if server.agent is not None:
        server.agent.close()
    gc.freeze()  # as in `talaria acp`: no teardown of the SDKs' objects while the editor waits
    return 0


def _load_pygls() -> None:
    import talaria.acp_server.lsp.server  # noqa: F401


def read_frame(stdin: IO[bytes]) -> tuple[bytes, dict[str, Any] | None]:
    """The first frame's bytes as read, and its message when it is one (else None)."""
    raw, length = b"", None
    for _ in range(MAX_HEADER_LINES):
        line = stdin.readline()
        raw += line
        if not line or line in (b"\r\n", b"\n"):
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            length = int(value)
    if length is None or not raw.endswith(b"\n\n") and not raw.endswith(b"\r\n\r\n"):
        return raw, None
    body = stdin.read(length)
    raw += body
    try:
        message = json.loads(body)
    except ValueError:
        return raw, None
    return raw, message if isinstance(message, dict) else None


def answer_initialize(message: dict[str, Any] | None, stdout: IO[bytes]) -> Any:
    """Reply to an `initialize` request now; its id (None when `message` is not one).

    Malformed params get InvalidParams here: pygls would drop the request unanswered."""
    if message is None or message.get("method") != "initialize" or "id" not in message:
        return None
    from talaria.acp_server.lsp.capabilities import initialize_result
    from talaria.acp_server.version import version

    params = message.get("params")
    reply: dict[str, Any] = {"id": message["id"], "jsonrpc": "2.0"}
    if not isinstance(params, dict) or not isinstance(params.get("capabilities"), dict):
        reply["error"] = {"code": INVALID_PARAMS, "message": "initialize needs params "
                          "{processId, rootUri, capabilities: {...}}: send the client's "
                          "capabilities object"}
    else:
        reply["result"] = initialize_result(params, version())
    body = json.dumps(reply).encode()
    stdout.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    stdout.flush()
    return message["id"]


class Replayed:
    """`stdin` with the bytes already read put back in front (what pygls reads from)."""

    def __init__(self, head: bytes, stdin: IO[bytes]) -> None:
        self.head = head
        self.stdin = stdin

    def readline(self) -> bytes:
        if not self.head:
            return self.stdin.readline()
        line, newline, rest = self.head.partition(b"\n")
        if not newline:  # the head ends mid-line: finish the line from stdin
            self.head = b""
            return line + self.stdin.readline()
        self.head = rest
        return line + newline

    def read(self, size: int) -> bytes:
        taken, self.head = self.head[:size], self.head[size:]
        return taken + (self.stdin.read(size - len(taken)) if len(taken) < size else b"")
