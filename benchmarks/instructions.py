"""Start-up in instructions: what `talaria acp` executes, counted by valgrind, not timed.

On a shared 2-core machine the wall times of `acp` move by half between runs; the number of
instructions an interpreter executes does not (PYTHONHASHSEED fixed, no other process in it).
Each stage runs what `talaria acp` runs, in one interpreter, up to a point:

    initialize     the server's imports, the configuration, logging: `initialize` can be answered
    machinery      + the session machinery (`AcpServer.parts`)
    session_new    + one `session/new` (replay model)
    sdk            + the OpenAI SDK's first import and client, as the warm-up builds it
    python         `python -c pass`: the floor

    python -m benchmarks acp_instructions      (needs valgrind; a few minutes)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

INITIALIZE = """
from talaria.agent import gcpause
gcpause.pause()  # as `talaria acp` does
import sys, anyio
from talaria.acp_server.logs import setup_logging
from talaria.acp_server.sandbox_probe import SandboxProbe
from talaria.acp_server.server import AcpServer
from talaria.agent.config import load_config
import anyio._backends._asyncio

class Peer:
    def on_request(self, method, handler): pass
    def on_notification(self, method, handler): pass
    async def notify(self, *args, **kwargs): pass

class Kept(SandboxProbe):  # the tier from the file: detection comes seconds later
    def __init__(self): pass
    async def tier(self): return "unknown"

config = load_config()
setup_logging(config.home, None)
server = AcpServer(Peer(), config, Kept(), gc_paused=True)
"""
MACHINERY = INITIALIZE + "server.parts\n"
SESSION_NEW = MACHINERY + """
async def new():
    await server.parts.sessions.new({"cwd": sys.argv[1], "mcpServers": []})
anyio.run(new)
"""
SDK = SESSION_NEW + """
from talaria.agent.providers.lazy import LoopBoundClient
LoopBoundClient("openai", "AsyncOpenAI", timeout=60.0, warm="chat.completions", api_key="x")._build()
"""
STAGES = {"initialize": INITIALIZE, "machinery": MACHINERY, "session_new": SESSION_NEW,
          "sdk": SDK, "python": "pass"}


def count(code: str, root: Path) -> int:
    """Instructions `python -c code` executes (its own process, not its children)."""
    env = {**os.environ, "PYTHONHASHSEED": "0", "TALARIA_HOME": str(root / "home"),
           "TALARIA_MODEL": f"replay:{root / 'replay.json'}"}
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                           sys.executable, "-c", code, str(root)],
                          capture_output=True, text=True, cwd=root, env=env, timeout=600)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode or not found:
        raise RuntimeError(f"valgrind run failed: {done.stderr[-2000:]}")
    return int(found.group(1))


def acp_instructions() -> Iterator[dict[str, Any]]:
    if shutil.which("valgrind") is None:
        yield {"metric": "skipped", "why": "no valgrind here (apt-get install valgrind)"}
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "replay.json").write_text(json.dumps({"turns": [{"text": "hi"}]}))
        count(SESSION_NEW, root)  # bytecode written, the store made: not counted
        millions = {name: round(count(code, root) / 1e6, 1) for name, code in STAGES.items()}
    yield {"metric": "acp_start_instructions_millions", **millions,
           "sdk_import": round(millions["sdk"] - millions["session_new"], 1),
           "what": "cumulative per stage (see benchmarks/instructions.py); python: -c pass"}


BENCHMARKS = {"acp_instructions": acp_instructions}
