"""The MCP servers the tests start: ours (tests/mcp_server.py, on the official SDK) and the
reference filesystem server from npm (installed by scripts/test where npm exists)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from talaria.tools.mcp.settings import ServerSpec, parse_server
from tests import ROOT, TESTS

SERVER = TESTS / "mcp_server.py"
NPM_FILESYSTEM = TESTS / ".npm" / "node_modules" / ".bin" / "mcp-server-filesystem"


def acp_entry(name: str, *flags: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """An ACP `mcpServers` stdio entry for our test server."""
    return {"name": name, "command": sys.executable, "args": [str(SERVER), "--name", name, *flags],
            "env": [{"name": k, "value": v} for k, v in (env or {}).items()]}


def stdio(name: str, *flags: str, origin: str = "editor", **extra: Any) -> ServerSpec:
    return parse_server({**acp_entry(name, *flags), **extra}, origin=origin)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HttpServer:
    """Our test server on streamable HTTP (or SSE), in a child process."""

    def __init__(self, name: str = "web", *, sse: bool = False) -> None:
        self.port = free_port()
        flag = "--sse" if sse else "--http"
        self.proc = subprocess.Popen([sys.executable, str(SERVER), "--name", name, flag, str(self.port)],
                                     cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{self.port}" + ("/sse" if sse else "/mcp")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.close()
        raise RuntimeError("the HTTP MCP server did not start")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def __enter__(self) -> HttpServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def project_file(root: Path) -> Path:
    path = root / "notes.txt"
    path.write_text("hello from the project\n")
    return path
