"""Issue 27 through the official ACP TypeScript SDK's client (`@agentclientprotocol/sdk`, the
package the vendored schema comes from): `tests/acp/ts/client.mjs` spawns `talaria acp` against
the fake LLM, sends each plan's requests through the SDK and answers the agent's requests with
its client handlers; every line either way is checked here against the vendored ACP schema.

Points covered: a tool card's `name` and a completed card's `rawOutput`, a command's card with
no cwd location, notices when `session.notices` is advertised (agent text otherwise), `/steer`
with nothing running, auth methods with and without `auth.terminal`, additional directories
(new, resume, list, a bad entry), `compaction_summary_chunk` under `session.compaction`.
`scripts/test` installs the SDK (`npm ci` in tests/acp/ts)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.acp_harness import SERVER_CMD, server_env
from tests.acpschema import CLIENT_TO_AGENT, Recorder

TS = Path(__file__).parent / "ts"
TIMEOUT = 120
SDK = TS / "node_modules" / "@agentclientprotocol" / "sdk"


def call(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


def initialize(**caps: Any) -> dict[str, Any]:
    return {"method": "initialize", "params": {
        "protocolVersion": 1, "clientInfo": {"name": "ts-sdk-tests", "version": "1"},
        "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, **caps}}}


def new_session(project: Path, **more: Any) -> dict[str, Any]:
    return {"method": "session/new", "params": {"cwd": str(project), "mcpServers": [], **more}}


def prompt(text: str) -> dict[str, Any]:
    return {"method": "session/prompt",
            "params": {"sessionId": "$sid", "prompt": [{"type": "text", "text": text}]}}


class Run:
    """What one plan did: the SDK's results per step, the updates, the checked transcript."""

    def __init__(self, out: dict[str, Any], recorder: Recorder) -> None:
        self.results: list[dict[str, Any]] = out["results"]
        self.notifications: list[dict[str, Any]] = out["updates"]
        self.recorder = recorder

    def result(self, method: str, nth: int = 0) -> Any:
        found = [r for r in self.results if r["method"] == method]
        assert "result" in found[nth], found[nth]
        return found[nth]["result"]

    def error(self, method: str, nth: int = 0) -> dict[str, Any]:
        found = [r for r in self.results if r["method"] == method]
        assert "error" in found[nth], found[nth]
        return found[nth]["error"]

    def updates(self, kind: str) -> list[dict[str, Any]]:
        return [n["update"] for n in self.notifications if n["update"]["sessionUpdate"] == kind]

    def asked(self) -> list[dict[str, Any]]:
        return self.recorder.messages(method="session/request_permission")


def run_plan(tmp_path: Path, llm: Any, steps: list[dict[str, Any]], *, project: Path,
             env: dict[str, str] | None = None) -> Run:
    node = shutil.which("node")
    if node is None or not SDK.is_dir():
        pytest.skip("node or the ACP TypeScript SDK not installed (scripts/test installs them: "
                    "npm ci in tests/acp/ts)")
    if llm.default_turn is None:
        llm.default_turn = {"text": "Done."}
    transcript = tmp_path / "transcript.jsonl"
    transcript.unlink(missing_ok=True)
    plan = {"command": SERVER_CMD, "cwd": str(project), "transcript": str(transcript),
            "env": server_env(tmp_path / "home", llm, **(env or {})), "steps": steps}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    done = subprocess.run([node, str(TS / "client.mjs"), str(tmp_path / "plan.json")],
                          capture_output=True, text=True, timeout=TIMEOUT, cwd=TS)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["exitCode"] == 0, done.stderr[-3000:]
    recorder = Recorder()  # every line either way, against the stable ACP v1 schema
    for row in map(json.loads, transcript.read_text().splitlines()):
        recorder.record(row["direction"], row["line"])
    assert not recorder.unanswered(CLIENT_TO_AGENT)
    return Run(out, recorder)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    return root


def test_cards_name_raw_output_and_a_command_without_its_folder(tmp_path: Path, fake_llm,
                                                                project: Path) -> None:
    fake_llm.script([{"tool_calls": [call("read_file", "r1", path="a.py"),
                                     call("terminal", "t1", command="echo hi")]},
                     {"text": "Read and ran."}])
    run = run_plan(tmp_path, fake_llm, [
        initialize(), {"method": "authenticate", "params": {"methodId": "environment"}},
        new_session(project), prompt("read and run")], project=project)
    assert run.result("session/prompt")["stopReason"] == "end_turn"
    # No auth.terminal: only the agent method (the schema's MUST), which authenticates.
    assert [m["id"] for m in run.result("initialize")["authMethods"]] == ["environment"]
    assert "type" not in run.result("initialize")["authMethods"][0]
    assert run.result("authenticate") == {}
    started = {u["toolCallId"]: u for u in run.updates("tool_call")}
    finished = {u["toolCallId"]: u for u in run.updates("tool_call_update")
                if u.get("status") == "completed"}
    assert (started["r1"]["name"], started["r1"]["kind"]) == ("read_file", "read")
    assert started["r1"]["locations"] == [{"path": str(project / "a.py")}]
    assert (started["t1"]["name"], started["t1"]["kind"]) == ("terminal", "execute")
    assert not started["t1"].get("locations") and "echo hi" in started["t1"]["title"]
    assert "x = 1" in json.dumps(finished["r1"]["rawOutput"])
    assert finished["t1"]["rawOutput"]["exit_code"] == 0 and "hi" in finished["t1"]["rawOutput"]["output"]


@pytest.mark.parametrize("notices", [True, False], ids=["notices", "no-notices"])
def test_steer_with_nothing_running_and_notices(tmp_path: Path, fake_llm, project: Path,
                                                notices: bool) -> None:
    caps: dict[str, Any] = {"auth": {"terminal": True}}
    if notices:
        caps["session"] = {"notices": {}}
    fake_llm.script([{"text": "On it."}])
    run = run_plan(tmp_path, fake_llm, [initialize(**caps), new_session(project),
                                        prompt("/steer check the tests")], project=project)
    assert run.result("session/prompt")["stopReason"] == "end_turn"  # not an error
    assert fake_llm.requests[-1]["json"]["messages"][-1]["content"] == "check the tests"
    said = "".join(u["content"]["text"] for u in run.updates("agent_message_chunk"))
    if notices:
        [notice] = run.updates("notice")
        assert notice["title"].startswith("No turn was running to steer") and notice["severity"]
        assert said == "On it."
    else:
        assert not run.updates("notice")
        assert "No turn was running to steer" in said and said.endswith("On it.")
    # auth.terminal: the terminal method too, first.
    methods = run.result("initialize")["authMethods"]
    assert [(m["id"], m.get("type")) for m in methods] == [("setup", "terminal"), ("environment", None)]


def test_additional_directories_round_trip(tmp_path: Path, fake_llm, project: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    fake_llm.script([{"tool_calls": [call("write_file", "w1", path=str(lib / "new.txt"),
                                          content="made\n")]},
                     {"text": "Wrote it."}])
    listing = {"method": "session/list", "params": {}}
    run = run_plan(tmp_path, fake_llm, [
        initialize(), new_session(project, additionalDirectories=[str(lib)]),
        {"method": "session/set_mode", "params": {"sessionId": "$sid", "modeId": "accept_edits"}},
        prompt("write in lib"), listing,
        {"method": "session/resume", "params": {"sessionId": "$sid", "cwd": str(project),
                                                "mcpServers": []}},
        listing,
        new_session(project, additionalDirectories=["lib"]),
    ], project=project)
    caps = run.result("initialize")["agentCapabilities"]["sessionCapabilities"]
    assert caps["additionalDirectories"] == {}
    sid = run.result("session/new")["sessionId"]
    assert (lib / "new.txt").read_text() == "made\n" and not run.asked()  # inside the project
    [first] = [s for s in run.result("session/list", 0)["sessions"] if s["sessionId"] == sid]
    assert first["additionalDirectories"] == [str(lib)] and first["cwd"] == str(project)
    [second] = [s for s in run.result("session/list", 1)["sessions"] if s["sessionId"] == sid]
    assert not second.get("additionalDirectories")  # resumed without them: none
    error = run.error("session/new", 1)
    assert error["code"] == -32602 and "'lib' is not an absolute path" in json.dumps(error)


def test_compaction_summary_streams_as_chunks(tmp_path: Path, fake_llm, project: Path) -> None:
    (project / "ledger.txt").write_text("".join(f"row {i}: balances to zero\n" for i in range(400)))
    summary = "## Goal\nread the ledger\n## Open work\n- none"
    fake_llm.script([{"tool_calls": [call("read_file", "r1", path="ledger.txt")]},
                     {"text": "Read."}, {"text": summary}])
    run = run_plan(tmp_path, fake_llm, [initialize(session={"compaction": {}}),
                                        new_session(project), prompt("read the ledger"),
                                        prompt("/compact")], project=project)
    assert run.result("session/prompt", 1)["stopReason"] == "end_turn"
    chunks = run.updates("compaction_summary_chunk")
    [update] = run.updates("compaction_update")
    assert "".join(c["content"]["text"] for c in chunks) == summary
    assert {c["compactionId"] for c in chunks} == {update["compactionId"]}
    assert update["status"] == "completed" and "summary" not in update
    said = "".join(u["content"]["text"] for u in run.updates("agent_message_chunk"))
    assert "Compacted the context" in said  # /compact's own reply
