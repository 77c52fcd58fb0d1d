"""What the first model request of `talaria run` and of `talaria acp` really carries: the
system prompt and the tool definitions, captured at a canned OpenAI endpoint on loopback (the
real SDK, the real command, a fresh TALARIA_HOME, every default tool), counted in cl100k.

    first_request_tokens   per door: `system` (the system message), `tools` (the definitions
                           as JSON with the default separators, the larger of the two ways a
                           request is written; `tools_compact` without spaces), `total`, and
                           the largest definitions. Target (issue 29): total ≤ 2,500.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.acp_client import INIT, RawClient
from benchmarks.canned_llm import CannedLLM
from talaria.agent.context import tokens

TARGET = 2_500


def _talaria() -> list[str]:
    installed = Path(sys.executable).with_name("talaria")
    return [str(installed)] if installed.exists() else [sys.executable, "-m", "talaria.acp_server"]


def _count(request: dict[str, Any]) -> dict[str, Any]:
    system = sum(tokens.count(m["content"]) for m in request["messages"] if m["role"] == "system")
    tools = request.get("tools", [])
    spaced = tokens.count(json.dumps(tools))
    sizes = sorted(((tokens.count(json.dumps(t)), t["function"]["name"]) for t in tools), reverse=True)
    return {"system": system, "tools": spaced,
            "tools_compact": tokens.count(json.dumps(tools, separators=(",", ":"))),
            "total": system + spaced, "target": TARGET, "tool_count": len(tools),
            "largest": {name: n for n, name in sizes[:4]}, "encoding": "cl100k_base"}


def prompt_overhead() -> Iterator[dict[str, Any]]:
    with CannedLLM("ok") as llm, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        project = root / "project"
        project.mkdir()
        env = {**os.environ, "TALARIA_HOME": str(root / "home"), "TALARIA_MODEL": "openai:canned",
               "OPENAI_API_KEY": "sk-bench", "OPENAI_BASE_URL": llm.openai_base_url}
        done = subprocess.run([*_talaria(), "run", "--yes", "--cwd", str(project), "hi"], env=env,
                              capture_output=True, timeout=120)
        if done.returncode != 0 or not llm.requests:
            raise RuntimeError(f"talaria run failed: {done.stderr.decode(errors='replace')[-500:]}")
        yield {"metric": "first_request_tokens", "door": "talaria run", **_count(llm.requests[0])}

        llm.requests.clear()
        client = RawClient({**env, "TALARIA_HOME": str(root / "home-acp")}, project)
        client.request("initialize", INIT)
        session = client.request("session/new", {"cwd": str(project), "mcpServers": []})
        client.request("session/prompt", {"sessionId": session["result"]["sessionId"],
                                          "prompt": [{"type": "text", "text": "hi"}]})
        client.close()
        yield {"metric": "first_request_tokens", "door": "talaria acp", **_count(llm.requests[0])}


BENCHMARKS = {"prompt_overhead": prompt_overhead}
