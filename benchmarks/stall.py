"""Event-loop stalls: how long a big request holds up unrelated ones in `talaria acp`.

The agent runs as an editor launches it, against the fake LLM on loopback (the real OpenAI SDK
path). While a 1 MB text prompt is processed, a second thread sends `session/list` every
few milliseconds; the slowest of those round trips is the worst stall of the event loop
(plus two pipe hops). Target: 50 ms (issue 9, item 11). Then a new process opens that session
(`session/load`: the transcript of megabytes parsed and replayed) under the same pings.
"""

from __future__ import annotations

import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.acp_client import child_env

PROMPT_BYTES = 1024 * 1024
RUNS = 5
PING_INTERVAL_S = 0.005
TARGET_MS = 50
INIT = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}}}


class _Agent:
    """`talaria acp` on pipes; a reader thread files every response under its id."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "talaria.acp_server", "acp"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, cwd=cwd)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._answers: dict[int, dict[str, Any]] = {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            message = json.loads(line)
            if "method" not in message:
                with self._cond:
                    self._answers[message["id"]] = message
                    self._cond.notify_all()

    def send(self, method: str, params: dict[str, Any]) -> int:
        request_id = next(self._ids)
        data = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        with self._lock:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data.encode() + b"\n")
            self.proc.stdin.flush()
        return request_id

    def wait(self, request_id: int, timeout: float = 60) -> dict[str, Any]:
        with self._cond:
            if not self._cond.wait_for(lambda: request_id in self._answers, timeout):
                raise TimeoutError(f"no answer to request {request_id}")
            return self._answers.pop(request_id)

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return self.wait(self.send(method, params))

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=20)


def _pings(agent: _Agent, stop: threading.Event, out: list[float]) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        agent.request("session/list", {})
        out.append(time.perf_counter() - started)
        time.sleep(PING_INTERVAL_S)


def prompt_stall() -> Iterator[dict[str, Any]]:
    from benchmarks.canned_llm import CannedLLM

    with tempfile.TemporaryDirectory() as tmp, CannedLLM("Read it.") as llm:
        root = Path(tmp)
        env = child_env(TALARIA_HOME=str(root / "home"), TALARIA_MODEL="openai:fake",
                        OPENAI_API_KEY="x", OPENAI_BASE_URL=llm.openai_base_url,
                        PYTHONPATH=str(Path(__file__).resolve().parents[1]))
        agent = _Agent(env, root)
        agent.request("initialize", INIT)
        session = agent.request("session/new", {"cwd": str(root), "mcpServers": []})["result"]["sessionId"]
        # The first prompt of a process imports the provider SDK (0.5-1 s of Python).
        first = _stalls(agent, session, ["hello"], runs=1)
        idle: list[float] = []
        for _ in range(20):
            started = time.perf_counter()
            agent.request("session/list", {})
            idle.append(time.perf_counter() - started)
        results = {name: _stalls(agent, session, blocks) for name, blocks in _shapes().items()}
        agent.close()
        loads = [_load_stall(env, root, session) for _ in range(LOADS)]
    yield {"metric": "event_loop_stall_first_prompt_ms", "worst": round(first[0][0] * 1000, 1),
           "prompt_turn_s": round(first[1][0], 3), "target": TARGET_MS,
           "note": "the first prompt of a process, which loads the provider SDK"}
    for shape, (worst, turns) in results.items():
        yield {"metric": "event_loop_stall_1mb_prompt_ms", "shape": shape,
               "worst": round(max(worst) * 1000, 1),
               "median_of_worst": round(statistics.median(worst) * 1000, 1),
               "idle_round_trip_ms": round(statistics.median(idle) * 1000, 2),
               "prompt_turn_s": round(statistics.median(turns), 3), "target": TARGET_MS,
               "prompt_bytes": PROMPT_BYTES, "runs": RUNS,
               "note": "slowest unrelated session/list round trip while the prompt runs; fake LLM"}
    yield {"metric": "event_loop_stall_session_load_ms", "worst": round(max(w for w, _ in loads) * 1000, 1),
           "load_s": round(statistics.median(t for _, t in loads), 3), "target": TARGET_MS, "runs": LOADS,
           "transcript_mb": round(RUNS * len(_shapes()) * PROMPT_BYTES / 2**20),
           "note": "session/load, in a new process, of the session the 1 MB prompts went to"}


LOADS = 3
SETTLE_S = 1.0
"""Between `session/new` and the load: the SDK warm-up that session/new starts is done."""


def _load_stall(env: dict[str, str], root: Path, session: str) -> tuple[float, float]:
    """(worst ping round trip, load time) of one `session/load` in a fresh process."""
    agent = _Agent(env, root)
    agent.request("initialize", INIT)
    agent.request("session/new", {"cwd": str(root), "mcpServers": []})  # the process's imports
    time.sleep(SETTLE_S)
    pings: list[float] = []
    stop = threading.Event()
    pinger = threading.Thread(target=_pings, args=(agent, stop, pings))
    pinger.start()
    time.sleep(0.05)
    started = time.perf_counter()
    reply = agent.request("session/load", {"sessionId": session, "cwd": str(root), "mcpServers": []})
    took = time.perf_counter() - started
    time.sleep(0.05)
    stop.set()
    pinger.join()
    agent.close()
    assert "result" in reply, reply
    return max(pings), took


def _shapes() -> dict[str, list[str]]:
    """1 MB of prompt text in shapes that are cheap and dear to tokenize."""
    prose = "lorem ipsum dolor sit amet, consectetur adipiscing elit " * (PROMPT_BYTES // 56 + 1)
    third = PROMPT_BYTES // 3
    return {"one_block_prose": [prose[:PROMPT_BYTES]],
            "three_blocks_no_spaces": ["x" * third, "y" * third, "z" * third]}


def _stalls(
    agent: _Agent, session: str, blocks: list[str], runs: int = RUNS
) -> tuple[list[float], list[float]]:
    """(worst ping round trip, prompt time) of each of `runs` prompts made of `blocks`."""
    worst, turns = [], []
    for run in range(runs):
        pings: list[float] = []
        stop = threading.Event()
        pinger = threading.Thread(target=_pings, args=(agent, stop, pings))
        pinger.start()
        time.sleep(0.05)
        prompt = [{"type": "text", "text": f"{run}{block}"} for block in blocks]
        started = time.perf_counter()
        reply = agent.request("session/prompt", {"sessionId": session, "prompt": prompt})
        turns.append(time.perf_counter() - started)
        stop.set()
        pinger.join()
        assert "result" in reply, reply
        worst.append(max(pings))
    return worst, turns
BENCHMARKS = {"stall": prompt_stall}
