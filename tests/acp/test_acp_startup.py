"""`talaria acp`'s start: `initialize` and `session/new` are answered before the session
machinery is imported; it loads once `session/new`'s answer is out, to build that session, or
with the first method that needs it."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio

from talaria.acp_server.jsonrpc import RpcError
from talaria.acp_server.server import AcpServer
from talaria.agent import gcpause
from talaria.agent.config import Config
from tests import ROOT

HEAVY = ("talaria.agent.host", "talaria.acp_server.sessions", "talaria.acp_server.turns")

ORDER = f"""
import json, sys, anyio
from pathlib import Path
from talaria.acp_server.sandbox_probe import SandboxProbe
from talaria.acp_server.server import AcpServer
from talaria.agent.config import Config

class Peer:
    def __init__(self):
        self.requests, self.updates = {{}}, []
    def on_request(self, method, handler): self.requests[method] = handler
    def on_notification(self, method, handler): pass
    async def notify(self, method, params): self.updates.append(params["update"]["sessionUpdate"])

heavy = {HEAVY!r}
loaded = lambda: [m for m in heavy if m in sys.modules]
home, cwd, model = sys.argv[1:4]
peer = Peer()
server = AcpServer(peer, Config(home=Path(home), model=model), SandboxProbe())
result = anyio.run(server.initialize, {{"protocolVersion": 1, "clientCapabilities": {{}}}})
print(result["protocolVersion"], loaded(), server.ready.is_set())
reply = anyio.run(peer.requests["session/new"], {{"cwd": cwd, "mcpServers": []}})
print(loaded(), server.ready.is_set())
anyio.run(reply.then)  # what the peer runs once the answer is written
session = server.host.get(reply.result["sessionId"])
built = server.parts.sessions.state(session)
print(loaded() == list(heavy), server.ready.is_set(), peer.updates)
print(json.dumps(built == {{k: reply.result[k] for k in built}}))
server.close()
"""


def test_initialize_and_session_new_are_answered_before_the_session_machinery_is_imported(
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"turns": [{"deltas": ["hi"]}]}))
    env = {**os.environ, "TALARIA_HOME": str(tmp_path / "home")}
    out = subprocess.run(
        [sys.executable, "-c", ORDER, str(tmp_path / "home"), str(tmp_path), f"replay:{scenario}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == [
        "1 [] False",
        "[] False",  # answered: the session is built after
        "True True ['available_commands_update']",  # built, then announced as before
        "true",  # the answer's modes and options are the built session's
    ]


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
        result = anyio.run(peer.requests["initialize"], {"protocolVersion": 1})
        assert result["protocolVersion"] == 1
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


class Editor(Registry):
    def __init__(self) -> None:
        super().__init__()
        self.updates: list[dict[str, Any]] = []

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        self.updates.append(params)


def test_requests_naming_a_session_being_built_wait_for_it(tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"turns": [{"deltas": ["hi"]}]}))
    peer = Editor()
    server = AcpServer(peer, Config(home=tmp_path / "home", model=f"replay:{scenario}"))  # type: ignore[arg-type]
    answers: dict[str, Any] = {}

    async def main() -> None:
        reply = await peer.requests["session/new"]({"cwd": str(tmp_path), "mcpServers": []})
        sid = reply.result["sessionId"]

        async def ask(method: str, params: dict[str, Any]) -> None:
            answers[method] = await peer.requests[method](params)

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, "session/resume", {"sessionId": sid, "cwd": str(tmp_path),
                                                  "mcpServers": []})
            tg.start_soon(ask, "session/list", {})
            await anyio.wait_all_tasks_blocked()
            assert answers == {}  # both wait: the session is not built yet
            await reply.then()  # the peer runs it once the answer is out
        answers["new"] = reply.result

    try:
        anyio.run(main)
    finally:
        server.close()
    new = answers["new"]
    assert answers["session/resume"].result == {k: new[k] for k in ("modes", "configOptions")}
    assert [s["sessionId"] for s in answers["session/list"]["sessions"]] == [new["sessionId"]]


def test_a_session_whose_build_failed_is_an_error_for_requests_naming_it(tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"turns": [{"deltas": ["hi"]}]}))
    (tmp_path / "home" / "sessions.db").mkdir(parents=True)  # the store cannot open
    peer = Editor()
    server = AcpServer(peer, Config(home=tmp_path / "home", model=f"replay:{scenario}"))  # type: ignore[arg-type]

    async def main() -> tuple[str, str]:
        reply = await peer.requests["session/new"]({"cwd": str(tmp_path), "mcpServers": []})
        sid = reply.result["sessionId"]
        async with anyio.create_task_group() as tg:
            tg.start_soon(reply.then)
            try:
                await peer.requests["session/set_mode"]({"sessionId": sid, "modeId": "plan"})
            except RpcError as exc:
                return sid, exc.message
        raise AssertionError("set_mode succeeded")

    try:
        sid, message = anyio.run(main)
    finally:
        server.close()
    cause = message.partition(f"session '{sid}' could not be opened: ")[2]
    assert cause.startswith("OperationalError: unable to open database file: ")
    assert "Traceback" not in message
    told = [u["update"]["content"]["text"] for u in peer.updates if u["sessionId"] == sid]
    assert told == [f"Talaria could not open this session: {cause}"]
