"""`talaria acp`'s start: `initialize` is answered before the session machinery is imported,
which loads right after that answer, or with the first method that needs it."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio

from talaria.acp_server.jsonrpc import Reply
from talaria.acp_server.server import AcpServer
from talaria.agent import gcpause
from talaria.agent.config import Config
from tests import ROOT

HEAVY = ("talaria.agent.host", "talaria.acp_server.sessions", "talaria.acp_server.turns")

ORDER = f"""
import sys, anyio
from talaria.acp_server.sandbox_probe import SandboxProbe
from talaria.acp_server.server import AcpServer
from talaria.agent.config import Config

class Peer:
    def on_request(self, method, handler): pass
    def on_notification(self, method, handler): pass

heavy = {HEAVY!r}
server = AcpServer(Peer(), Config(home=sys.argv[1]), SandboxProbe())
reply = anyio.run(server.initialize, {{"protocolVersion": 1, "clientCapabilities": {{}}}})
print(reply.result["protocolVersion"], [m for m in heavy if m in sys.modules], server.ready.is_set())
anyio.run(reply.then)  # what the peer runs once the answer is written
print([m for m in heavy if m in sys.modules] == list(heavy), server.ready.is_set())
"""


def test_initialize_is_answered_before_the_session_machinery_is_imported(tmp_path: Path) -> None:
    env = {**os.environ, "TALARIA_HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", ORDER, str(tmp_path)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.splitlines() == ["1 [] False", "True True"]


class Registry:
    def __init__(self) -> None:
        self.requests: dict[str, Any] = {}

    def on_request(self, method: str, handler: Any) -> None:
        self.requests[method] = handler

    def on_notification(self, method: str, handler: Any) -> None:
        pass


def test_a_session_method_before_initialize_loads_the_machinery_itself(tmp_path: Path) -> None:
    peer = Registry()
    server = AcpServer(peer, Config(home=tmp_path))  # type: ignore[arg-type]
    assert not server.ready.is_set()
    try:
        listed = anyio.run(peer.requests["session/list"], {})
        assert listed["sessions"] == [] and server.ready.is_set()
        reply = anyio.run(peer.requests["initialize"], {"protocolVersion": 1})
        assert isinstance(reply, Reply) and reply.then is not None
        anyio.run(reply.then)  # loaded already: nothing more
    finally:
        server.close()


def test_the_collector_paused_for_start_up_runs_again_once_the_machinery_is_built(
    tmp_path: Path,
) -> None:
    was = gc.isenabled()
    gc.enable()
    gcpause.pause()  # as `talaria acp` does before importing the server
    server = AcpServer(Registry(), Config(home=tmp_path), gc_paused=True)  # type: ignore[arg-type]
    try:
        assert not gc.isenabled()
        server.parts  # noqa: B018 -- built for its side effect
        assert gc.isenabled() and gc.get_freeze_count() > 0
    finally:
        server.close()
        gc.unfreeze()
        gc.enable() if was else gc.disable()
