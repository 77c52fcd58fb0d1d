"""Start `talaria lsp`: guard stdio, read the config, serve LSP on the private fds."""

from __future__ import annotations

import gc
import logging
import os
import sys


def main() -> int:
    from talaria.acp_server.logs import setup_logging
    from talaria.acp_server.stdio import protect_stdio_fds
    from talaria.agent.config import load_config
    from talaria.tools import procs

    protocol_in, protocol_out = protect_stdio_fds()
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
    procs.reap_orphans(config.home)

    from talaria.acp_server.lsp.server import build_server

    server = build_server(config)
    with os.fdopen(protocol_in, "rb") as stdin, os.fdopen(protocol_out, "wb") as stdout:
        server.start_io(stdin, stdout)
    if server.agent is not None:
        server.agent.close()
    gc.freeze()  # as in `talaria acp`: no teardown of the SDKs' objects while the editor waits
    return 0
