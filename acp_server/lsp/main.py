"""Start `talaria lsp`: guard stdio, read the config, answer `initialize` at once, serve LSP.

lsprotocol's types take most of start-up to import, so they load in a thread while the main
thread reads the editor's first message: an `initialize` is answered from `capabilities.py`
straight away, then given to pygls like any message (pygls sets itself up from it; its own
reply is dropped). Every frame, the first and all later ones, is read by `frames.FrameReader`
(bounded, resyncing: pygls sees only well-formed frames).
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import threading
from typing import Any

from talaria.acp_server.lsp.frames import FrameReader, FramingLost, Output, valid_id

INVALID_PARAMS = -32602
FRAMING_LOST = 1
"""Exit status when stdin cannot be read as LSP frames any more (as LSP's exit without
shutdown)."""


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
    server = None
    with os.fdopen(protocol_in, "rb") as stdin, os.fdopen(protocol_out, "wb") as stdout:
        out = Output(stdout)
        frames = FrameReader(stdin, out)
        try:
            answered = answer_initialize(frames.message(), out)
            loader.join()
            from talaria.acp_server.lsp.server import build_server
            from talaria.tools import procs

            procs.reap_orphans(config.home)
            server = build_server(config)
            server.protocol.answered, server.protocol.answered_error = answered
            server.start_io(frames, out)  # type: ignore[arg-type]
        except FramingLost as exc:
            print(f"talaria lsp: {exc}", file=sys.stderr)
            return FRAMING_LOST
        finally:
            if server is not None and server.agent is not None:
                server.agent.close()
    gc.freeze()  # as in `talaria acp`: no teardown of the SDKs' objects while the editor waits
    return server.protocol.exit_status if server is not None else 0


def _load_pygls() -> None:
    import talaria.acp_server.lsp.server  # noqa: F401


def answer_initialize(message: dict[str, Any] | None, out: Output) -> tuple[Any, bool]:
    """Reply to an `initialize` request now: (its id, whether the reply is an error); (None,
    False) when `message` is not one.

    Malformed params get InvalidParams here: pygls then never sees the request."""
    if (message is None or message.get("method") != "initialize" or message.get("jsonrpc") != "2.0"
            or not valid_id(message.get("id"))):
        return None, False
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
    out.send(reply)
    return message["id"], "error" in reply

