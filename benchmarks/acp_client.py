"""The minimal raw ACP client the benchmarks drive `talaria acp` with (pipes, one JSON line per
message, `fs/read_text_file` answered at once), and the environment it is given."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def child_env(**extra: str) -> dict[str, str]:
    """The environment an editor gives the agent: ours, but with bytecode caching on, as an
    installed agent has it (PYTHONDONTWRITEBYTECODE=1 in a shell would time the compilation
    of every module at every spawn, ~0.25 s, not the agent)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, **extra}


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
