"""ACP front-door benchmarks: start-up latency, idle memory, per-turn protocol overhead.

The agent runs as `talaria acp` exactly as an editor launches it; a minimal raw client on
pipes drives it, answering `fs/read_text_file` at once, so the measured time is the server's
plus two pipe hops per message (an upper bound on the server's own time).
"""

from __future__ import annotations

import json
import os
import shutil
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
    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        command = [shutil.which("talaria") or sys.executable, *([] if shutil.which("talaria") else ["-m", "talaria.acp_server"]), "acp"]
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, cwd=cwd)
        self.next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        my_id = self.next_id
        self.send({"jsonrpc": "2.0", "id": my_id, "method": method, "params": params})
        while True:
            message = json.loads(self.proc.stdout.readline())
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
        self.proc.stdin.close()
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
               "TALARIA_MODEL": f"replay:{_scenario(root)}", "TALARIA_MODE": "dont_ask"}
        init_s, new_s, rss = [], [], []
        for _ in range(RUNS):
            client = RawClient(env, root)
            client.request("initialize", INIT)
            init_s.append(time.perf_counter() - client.started)
            client.request("session/new", {"cwd": str(root), "mcpServers": []})
            new_s.append(time.perf_counter() - client.started)
            time.sleep(0.05)
            rss.append(client.rss_mb())
            loaded = subprocess.run(["cat", f"/proc/{client.proc.pid}/maps"], capture_output=True, text=True).stdout
            client.close()
        yield {"metric": "spawn_to_initialize_s", "median": round(statistics.median(init_s), 3),
               "p90": round(sorted(init_s)[int(RUNS * 0.9)], 3), "target": 0.25, "runs": RUNS}
        yield {"metric": "spawn_to_session_new_s", "median": round(statistics.median(new_s), 3),
               "target": 0.4, "runs": RUNS}
        yield {"metric": "idle_rss_mb_after_session_new", "median": round(statistics.median(rss), 1),
               "target": 45, "sdk_loaded": any(n in loaded for n in ("/openai/", "/anthropic/"))}

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


BENCHMARKS = {"acp": acp}
