"""`talaria trajectories export` of a batch-sized file: what a user's export of N records
costs, the command run as users run it (a subprocess). Each record gets the system prompt
and tool definitions (~11K characters) that redaction scans: once per distinct text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RECORDS = (200, 2000)


def _file(path: Path, n: int) -> None:
    with path.open("w") as out:
        for i in range(n):
            turns = [{"from": "human", "value": f"task {i}: " + "x" * 100},
                     {"from": "gpt", "value": "done " + "y" * 100}]
            out.write(json.dumps({"conversations": turns}) + "\n")


def export() -> Iterator[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {**os.environ, "TALARIA_HOME": str(root / "home")}
        for n in RECORDS:
            source = root / f"in-{n}.jsonl"
            _file(source, n)
            for fmt in ("sharegpt", "atif"):
                started = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, "-m", "talaria.acp_server", "trajectories", "export",
                     str(source), "--format", fmt, "-o", str(root / f"out-{n}-{fmt}")],
                    env=env, capture_output=True, text=True, timeout=600)
                wall = time.perf_counter() - started
                yield {"records": n, "format": fmt, "ok": done.returncode == 0,
                       "wall_s": round(wall, 3), "ms_per_record": round(wall * 1000 / n, 2)}


BENCHMARKS = {"export": export}
