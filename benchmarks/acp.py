"""ACP front-door benchmarks: start-up latency, idle memory, per-turn protocol overhead.

The agent runs as `talaria acp` exactly as an editor launches it; a minimal raw client on
pipes drives it, answering `fs/read_text_file` at once, so the measured time is the server's
plus two pipe hops per message (an upper bound on the server's own time).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RUNS = 15


class RawClient:
    def __init__(self, env: dict[str, str], cwd: Path, command: list[str] | None = None) -> None:
        """`command`: default the `talaria acp` installed beside this interpreter, else this
        interpreter's module. Not the first `talaria` on PATH: that may be another checkout's
        (a pyenv shim to the main tree), which is how a worktree once measured main's code."""
        if command is None:
            installed = Path(sys.executable).with_name("talaria")
            command = [str(installed), "acp"] if installed.exists() else [
                sys.executable, "-m", "talaria.acp_server", "acp"]
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, cwd=cwd)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        self.next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        self.stdin.write((json.dumps(message) + "\n").encode())
        self.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        my_id = self.next_id
        self.send({"jsonrpc": "2.0", "id": my_id, "method": method, "params": params})
        while True:
            message = json.loads(self.stdout.readline())
            if message.get("id") == my_id and "method" not in message:
                return message
            if message.get("method") == "fs/read_text_file":
                text = Path(message["params"]["path"]).read_text()
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": {"content": text}})

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def close(self) -> None:
        self.stdin.close()
        self.proc.wait(timeout=10)


INIT = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}}}


def _scenario(directory: Path) -> Path:
    reads = [{"name": "read_file", "arguments": {"path": f"f{i}.txt"}} for i in range(5)]
    turns = [
        {"deltas": [f"chunk {i} " for i in range(25)], "tool_calls": reads},
        {"deltas": [f"more {i} " for i in range(25)]},
    ]
    path = directory / "scenario.json"
    path.write_text(json.dumps({"turns": turns * (RUNS + 5)}))
    return path


def acp() -> Iterator[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i in range(5):
            (root / f"f{i}.txt").write_text(f"file {i}\n" * 20)
        env = {**os.environ, "TALARIA_HOME": str(root / "home"),
               "TALARIA_MODEL": f"replay:{_scenario(root)}", "TALARIA_MODE": "auto"}
        init_s, new_s, rss = [], [], []
        for _ in range(RUNS):
            client = RawClient(env, root)
            client.request("initialize", INIT)
            init_s.append(time.perf_counter() - client.started)
            client.request("session/new", {"cwd": str(root), "mcpServers": []})
            new_s.append(time.perf_counter() - client.started)
            time.sleep(0.05)
            rss.append(client.rss_mb())
            client.close()
        yield {"metric": "spawn_to_initialize_s", "median": round(statistics.median(init_s), 3),
               "p90": round(sorted(init_s)[int(RUNS * 0.9)], 3), "target": 0.15, "runs": RUNS}
        yield {"metric": "spawn_to_session_new_s", "median": round(statistics.median(new_s), 3),
               "target": 0.4, "runs": RUNS}
        yield {"metric": "rss_mb_after_session_new", "median": round(statistics.median(rss), 1),
               "target": 45, "model": "replay (no SDK)"}

        client = RawClient(env, root)
        client.request("initialize", INIT)
        session = client.request("session/new", {"cwd": str(root), "mcpServers": []})["result"]["sessionId"]
        turns = []
        for _ in range(RUNS):
            started = time.perf_counter()
            reply = client.request("session/prompt", {"sessionId": session,
                                                      "prompt": [{"type": "text", "text": "go"}]})
            turns.append(time.perf_counter() - started)
            assert reply["result"]["stopReason"] == "end_turn", reply
        client.close()
        yield {"metric": "prompt_turn_overhead_ms", "median": round(statistics.median(turns[2:]) * 1000, 2),
               "target": 20, "chunks": 50, "tool_calls": 5,
               "note": "instant replay model in the server; includes client pipe hops and fs reads"}
        yield from _first_prompt(root)


MODEL_DELAY_S = 0.2
"""What the canned endpoint takes per answer: subtracted to get the first prompt's overhead."""
SETTLE_S = 3.0
"""How long the editor sits between `session/new` and the first prompt (someone typing)."""


def _sdk_loaded(pid: int) -> bool:
    maps = Path(f"/proc/{pid}/maps").read_text()
    return "/openai/" in maps or "/pydantic_core/" in maps


def _first_prompt(root: Path) -> Iterator[dict[str, Any]]:
    """The real OpenAI SDK over HTTP (a canned endpoint on loopback): the first prompt's time
    over the model's, with the SDK loaded ahead (after `session/new`) or not yet; RSS then."""
    from benchmarks.canned_llm import CannedLLM

    with CannedLLM("ok", delay=MODEL_DELAY_S) as llm:
        env = {**os.environ, "TALARIA_HOME": str(root / "home-sdk"), "TALARIA_MODEL": "openai:canned",
               "OPENAI_API_KEY": "sk-bench", "OPENAI_BASE_URL": llm.openai_base_url}
        results: dict[str, list[float]] = {"settled": [], "at_once": []}
        rss_before: list[float] = []
        rss_after: list[float] = []
        loaded_before: list[bool] = []
        for run in range(6):
            settled = run % 2 == 0
            client = RawClient(env, root)
            client.request("initialize", INIT)
            session = client.request("session/new", {"cwd": str(root), "mcpServers": []})["result"]["sessionId"]
            if settled:
                time.sleep(SETTLE_S)
                loaded_before.append(_sdk_loaded(client.proc.pid))
                rss_before.append(client.rss_mb())
            started = time.perf_counter()
            client.request("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]})
            results["settled" if settled else "at_once"].append(time.perf_counter() - started - MODEL_DELAY_S)
            rss_after.append(client.rss_mb())
            client.close()
    yield {"metric": "first_prompt_overhead_s", "sdk": "openai (real, over loopback HTTP)",
           "after_a_pause_median": round(statistics.median(results["settled"]), 3),
           "straight_after_session_new_median": round(statistics.median(results["at_once"]), 3),
           "target": 0.3, "sdk_loaded_before_the_prompt": all(loaded_before),
           "pause_s": SETTLE_S, "model_delay_s": MODEL_DELAY_S}
    yield {"metric": "rss_mb_sdk_loaded", "after_session_new_and_pause": round(statistics.median(rss_before), 1),
           "after_first_prompt": round(statistics.median(rss_after), 1), "sdk": "openai"}


BENCHMARKS = {"acp": acp}
