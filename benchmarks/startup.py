"""Start-up of `talaria acp` as an editor sees it, against the interpreter's own start and,
with TALARIA_BENCH_HERMES, Hermes' ACP adapter in the same rounds.

    python_startup_s         `python -c pass` with this interpreter: the floor (and the load
                             average, 1/5/15 min, when the rounds ended)
    spawn_to_initialize_s    spawn → the `initialize` answer; `over_python_s` the distance
    spawn_to_session_new_s   spawn → the `session/new` answer
    rss_mb_after_session_new
Each round spawns Talaria, then Hermes (when given), then the bare interpreter, so load
drift on a shared machine hits all alike; `vs_hermes` is the ratio of medians. Round 0 writes
bytecode and stores and is not counted. Hermes runs with its home in a temporary folder and
every HTTP(S) request sent to a closed loopback port (its catalog fetches fail at once), and
its lazy installs off (`HERMES_DISABLE_LAZY_INSTALLS`, as its Docker image has it): without
boto3, Hermes 0.19 otherwise runs pip at every start for its Bedrock adapter (~9 s here).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks import hermes
from benchmarks.acp_client import INIT, RawClient

RUNS = 15
CLOSED_PORT = "http://127.0.0.1:9"
"""Where Hermes' outside requests go: the discard port on loopback, nothing listening."""


def hermes_command(root: Path) -> list[str]:
    boot = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
            "from acp_adapter.entry import main; main()")
    return [hermes.interpreter(root), "-c", boot, str(root)]


def hermes_env(base: dict[str, str], home: str) -> dict[str, str]:
    return {**base, "HERMES_HOME": home, "HERMES_DISABLE_LAZY_INSTALLS": "1",
            "HTTP_PROXY": CLOSED_PORT, "HTTPS_PROXY": CLOSED_PORT,
            "http_proxy": CLOSED_PORT, "https_proxy": CLOSED_PORT,
            "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


def _spawn(env: dict[str, str], cwd: Path, command: list[str] | None) -> tuple[float, float, float]:
    client = RawClient(env, cwd, command)
    client.request("initialize", INIT)
    init = time.perf_counter() - client.started
    client.request("session/new", {"cwd": str(cwd), "mcpServers": []})
    new = time.perf_counter() - client.started
    time.sleep(0.05)
    rss = client.rss_mb()
    client.close()
    return init, new, rss


def _python() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - started


def startup(env: dict[str, str], cwd: Path) -> Iterator[dict[str, Any]]:
    root = hermes.checkout()
    ours: list[tuple[float, float, float]] = []
    theirs: list[tuple[float, float, float]] = []
    python: list[float] = []
    with tempfile.TemporaryDirectory(prefix="hermes-home-") as home:
        for run in range(RUNS + 1):
            t = _spawn(env, cwd, None)
            h = _spawn(hermes_env(env, home), cwd, hermes_command(root)) if root else None
            p = _python()
            if run:
                ours.append(t)
                python.append(p)
                if h is not None:
                    theirs.append(h)
    floor = statistics.median(python)
    yield {"metric": "python_startup_s", "median": round(floor, 3), "runs": RUNS,
           "note": "python -c pass, this interpreter",
           "load_avg": [round(x, 2) for x in os.getloadavg()]}
    for i, (metric, target) in enumerate((("spawn_to_initialize_s", 0.2),
                                          ("spawn_to_session_new_s", 0.1))):
        median = statistics.median(x[i] for x in ours)
        out = {"metric": metric, "median": round(median, 3),
               "p90": round(sorted(x[i] for x in ours)[int(RUNS * 0.9)], 3),
               "over_python_s": round(median - floor, 3), "runs": RUNS}
        if theirs and root is not None:
            their = statistics.median(x[i] for x in theirs)
            out |= {"hermes": round(their, 3), "vs_hermes": round(median / their, 3),
                    "target_vs_hermes": target, "hermes_version": hermes.version(root)}
        yield out
    out = {"metric": "rss_mb_after_session_new", "median": round(statistics.median(x[2] for x in ours), 1),
           "target": 45, "model": "replay (no SDK)"}
    if theirs:
        out["hermes"] = round(statistics.median(x[2] for x in theirs), 1)
    yield out
