"""Web and MCP: what MCP servers add to `session/new`, that the first prompt does not wait for
the slowest server, and web_extract of 10 local pages in one call.

- `mcp_session_new_added_s`: `talaria acp` as an editor runs it, `session/new` with three
  stdio MCP servers (tests/mcp_server.py, on the official SDK; one sleeps 3 s before it
  serves) against none. Target <= 0.5 s added.
- `mcp_first_prompt_before_slowest`: right after that `session/new`, a prompt to the fake LLM
  ends while the slow server is still starting (its tools are not in the first model call)
  and its tools are offered by a later one.
- `web_extract_10_pages_s`: one web_extract call of 10 pages from a loopback server (warm:
  the session's start already imported the extractor). Target <= 0.3 s.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.acp_client import INIT, RawClient

RUNS = 7
SLOW_START_S = 3.0


def _client(env: dict[str, str], cwd: Path) -> RawClient:
    """`RawClient` on this interpreter's `talaria` (not whichever `talaria` is on PATH)."""
    return RawClient(env, cwd, [sys.executable, "-m", "talaria.acp_server", "acp"])


def acp_entry(name: str, *flags: str) -> dict[str, Any]:
    """An ACP `mcpServers` stdio entry for the small MCP server the tests use (run as a
    program, not imported)."""
    server = Path(__file__).resolve().parent.parent / "tests" / "mcp_server.py"
    return {"name": name, "command": sys.executable, "args": [str(server), "--name", name, *flags],
            "env": []}


def _servers(tag: str) -> list[dict[str, Any]]:
    return [acp_entry(f"{tag}a"), acp_entry(f"{tag}b"), acp_entry(f"{tag}slow", "--delay", str(SLOW_START_S))]


def mcp_start() -> Iterator[dict[str, Any]]:
    from benchmarks.canned_llm import CannedLLM

    with tempfile.TemporaryDirectory() as tmp, CannedLLM("ok") as llm:
        root = Path(tmp)
        env = {**os.environ, "TALARIA_HOME": str(root / "home"), "TALARIA_MODEL": "openai:fake",
               "OPENAI_API_KEY": "x", "OPENAI_BASE_URL": llm.openai_base_url,
               "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
        times: dict[str, list[float]] = {"none": [], "three": []}
        first_prompt: dict[str, list[float]] = {"none": [], "three": []}
        early = []
        for run in range(RUNS):
            for label in ("none", "three"):
                client = _client(env, root)
                client.request("initialize", INIT)
                servers = _servers(f"b{run}") if label == "three" else []
                started = time.perf_counter()
                reply = client.request("session/new", {"cwd": str(root), "mcpServers": servers})
                times[label].append(time.perf_counter() - started)
                session = reply["result"]["sessionId"]
                before = len(llm.requests)
                client.request("session/prompt", {"sessionId": session,
                                                  "prompt": [{"type": "text", "text": "hi"}]})
                first_prompt[label].append(time.perf_counter() - started)
                offered = _offered(llm.requests[before])
                early.append(not any(n.startswith(f"mcp__b{run}slow__") for n in offered))
                client.close()
        added = statistics.median(times["three"]) - statistics.median(times["none"])
        yield {"metric": "mcp_session_new_added_s", "median": round(added, 3), "target": 0.5,
               "none_median_s": round(statistics.median(times["none"]), 3),
               "three_median_s": round(statistics.median(times["three"]), 3), "runs": RUNS}
        yield {"metric": "mcp_first_prompt_before_slowest", "value": all(early),
               "first_prompt_done_median_s": round(statistics.median(first_prompt["three"]), 3),
               "first_prompt_done_without_mcp_s": round(statistics.median(first_prompt["none"]), 3),
               "slowest_server_start_s": SLOW_START_S, "runs": RUNS,
               "note": "from session/new; on 2 cores the servers' own start-up competes for CPU"}
        yield _later_tools(env, root, llm)


def _later_tools(env: dict[str, str], root: Path, llm: Any) -> dict[str, Any]:
    """The slow server's tools arrive at a later model call of the same session."""
    client = _client(env, root)
    client.request("initialize", INIT)
    started = time.perf_counter()
    session = client.request("session/new", {"cwd": str(root), "mcpServers": _servers("late")})
    sid = session["result"]["sessionId"]
    arrived = None
    while time.perf_counter() - started < 60 and arrived is None:
        before = len(llm.requests)
        client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
        if any(n.startswith("mcp__lateslow__") for n in _offered(llm.requests[before])):
            arrived = time.perf_counter() - started
        time.sleep(0.05)
    client.close()
    return {"metric": "mcp_slow_server_tools_arrive_s", "value": round(arrived or -1, 3),
            "slowest_server_start_s": SLOW_START_S}


def _offered(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


def web_extract() -> Iterator[dict[str, Any]]:
    import anyio

    from benchmarks.webserver import PageServer
    from talaria.tools.web.pages import WebState, extract_pages
    from talaria.tools.web.settings import web_settings

    with tempfile.TemporaryDirectory() as tmp, PageServer() as web:
        settings, _ = web_settings(search=None, extract="local", endpoint=None,
                                   allow=("127.0.0.0/8",), env={}, cache_dir=Path(tmp),
                                   cache_ttl=0.0)
        assert settings is not None
        state = WebState(settings)
        cold_started = time.perf_counter()
        anyio.run(extract_pages, state, [web.url("/page/cold")])
        cold = time.perf_counter() - cold_started
        runs = []
        for run in range(RUNS):
            urls = [web.url(f"/page/{run}-{i}") for i in range(10)]
            started = time.perf_counter()
            results = anyio.run(extract_pages, state, urls)
            runs.append(time.perf_counter() - started)
            assert all("Page number" in r["content"] for r in results), results
        yield {"metric": "web_extract_10_pages_s", "median": round(statistics.median(runs), 3),
               "max": round(max(runs), 3), "target": 0.3, "runs": RUNS,
               "first_call_cold_s": round(cold, 3),
               "note": "loopback server, distinct pages (no cache), HTML -> markdown"}


BENCHMARKS = {"web_mcp": lambda: [*mcp_start(), *web_extract()]}
