"""ACP front-door benchmarks: start-up latency (benchmarks/startup.py), idle memory, per-turn
protocol overhead, the first prompt.

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

from benchmarks.acp_client import INIT, RawClient, child_env
from benchmarks.startup import startup

RUNS = 15


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
        env = child_env(TALARIA_HOME=str(root / "home"), TALARIA_MODEL=f"replay:{_scenario(root)}",
                        TALARIA_MODE="auto")
        yield from startup(env, root)

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
FIRST_PROMPT_RUNS = 10
"""How long the editor sits between `session/new` and the first prompt (someone typing)."""


def _sdk_loaded(pid: int) -> bool:
    maps = Path(f"/proc/{pid}/maps").read_text()
    return "/openai/" in maps or "/pydantic_core/" in maps


SDK_IMPORT = ("from talaria.agent import codecache, lazytypes; codecache.install()\n"
              "import time, talaria.acp_server.server, talaria.acp_server.sessions, "
              "talaria.acp_server.turns, talaria.acp_server.learning\n"
              "from talaria.agent.gcpause import paused\n"
              "started = time.perf_counter()\n"
              "lazytypes.install('openai.types')\n"
              "with paused():\n"
              "    import openai; openai.AsyncOpenAI(api_key='x').chat.completions\n"
              "print(time.perf_counter() - started)")
"""What the provider's warm-up adds to what `talaria acp` has imported by `session/new`, with
the collector paused, the SDK's types lazy and the generated-code cache on (its file as the
agent's runs left it), as the agent has them: the floor of a prompt sent before it is done
(nothing else runs meanwhile: both need the GIL)."""


def _sdk_import() -> float:
    out = subprocess.run([sys.executable, "-c", SDK_IMPORT], check=True, capture_output=True, text=True)
    return float(out.stdout)


def _first_prompt(root: Path) -> Iterator[dict[str, Any]]:
    """The real OpenAI SDK over HTTP (a canned endpoint on loopback): the first prompt's time
    over the model's, with the SDK loaded ahead (after `session/new`) or not yet; RSS then.
    In the same rounds, the SDK's import in an interpreter that has imported what `talaria
    acp` has (`SDK_IMPORT`): what a prompt sent straight after `session/new` waits for."""
    from benchmarks.canned_llm import CannedLLM

    with CannedLLM("ok", delay=MODEL_DELAY_S) as llm:
        env = child_env(TALARIA_HOME=str(root / "home-sdk"), TALARIA_MODEL="openai:canned",
                        OPENAI_API_KEY="sk-bench", OPENAI_BASE_URL=llm.openai_base_url)
        results: dict[str, list[float]] = {"settled": [], "at_once": []}
        rss_before: list[float] = []
        rss_after: list[float] = []
        loaded_before: list[bool] = []
        sdk_import: list[float] = []
        for run in range(FIRST_PROMPT_RUNS):
            sdk_import.append(_sdk_import())
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
    at_once, floor = statistics.median(results["at_once"]), statistics.median(sdk_import)
    yield {"metric": "first_prompt_overhead_s", "sdk": "openai (real, over loopback HTTP)",
           "load_avg": [round(x, 2) for x in os.getloadavg()],
           "after_a_pause_median": round(statistics.median(results["settled"]), 3),
           "straight_after_session_new_median": round(at_once, 3),
           "sdk_import_s": round(floor, 3), "over_sdk_import_s": round(at_once - floor, 3),
           "target": 0.3, "sdk_loaded_before_the_prompt": all(loaded_before),
           "pause_s": SETTLE_S, "model_delay_s": MODEL_DELAY_S}
    yield {"metric": "rss_mb_sdk_loaded", "after_session_new_and_pause": round(statistics.median(rss_before), 1),
           "after_first_prompt": round(statistics.median(rss_after), 1), "sdk": "openai"}


BENCHMARKS = {"acp": acp}
