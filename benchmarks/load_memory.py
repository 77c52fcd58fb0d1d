"""Memory of a loaded session: RSS of `talaria acp` once `session/load` of a stored session
of 200, 2,000 and 20,000 messages and what follows it have settled (and, with
TALARIA_BENCH_HERMES, of Hermes' ACP adapter after loading the same conversation from its own
store, in the same rounds). ROUNDS loads of each; medians.

    session_load_rss_mb   per size: RSS once settled (`rss`) and its peak (`hwm`),
                          the growth from the smallest size and per message; target (issue
                          29): growth ≤ Hermes'. `text_kb_per_message`: what a message's
                          texts weigh (content, tool-call arguments); Talaria's
                          `overhead_kb_per_message` is the rest, bound by
                          `OVERHEAD_KB_PER_MESSAGE` (docs/architecture.md, "State on disk").

A conversation is exchanges of a user line (~200 characters), an assistant line with one
tool call (~100 characters of arguments) and its result (~1,500 characters), seeded, the same
for both agents.
"""

from __future__ import annotations

import json
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks import hermes
from benchmarks.acp_client import INIT, RawClient, child_env
from benchmarks.startup import hermes_command, hermes_env
from talaria.agent.trajectories.batch.cpu import tree_load

SIZES = (200, 2_000, 20_000)
ROUNDS = 3
"""Loads of each size per agent; the figures are medians (a round's growth is from its own
smallest load)."""
SETTLE_S = 2.0
SETTLE_MB = 0.1
SETTLE_CPU_S = 0.05
SETTLE_MAX_S = 20.0
OVERHEAD_KB_PER_MESSAGE = 0.6
"""What a loaded message may hold beyond its texts: its dict (184 bytes), a header per
string (49), a tool call's dict and list (~270), the heap's slack."""
WORDS = ["the", "of", "and", "to", "in", "is", "for", "that", "with", "on", "as", "are", "this", "be", "by", "from", "at", "an", "it", "or", "which", "function", "module", "request", "value", "test", "error", "file", "path", "line", "return", "class", "import"]

_HERMES_DRIVER = """
from hermes_state import SessionDB
def store(session_id, cwd, messages):
    db = SessionDB()
    db.create_session(session_id, "acp", model="canned", model_config=json.dumps({"cwd": cwd}))
    for m in messages:
        db.append_message(session_id, m["role"], content=m.get("content"),
                          tool_calls=m.get("tool_calls"), tool_call_id=m.get("tool_call_id"),
                          tool_name=m.get("name"))
    return True
OPS = {"store": store}
"""


def _text(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    while sum(map(len, words)) + len(words) < chars:
        words.append(rng.choice(WORDS))
    return " ".join(words)


def conversation(count: int, seed: int = 29) -> list[dict[str, Any]]:
    """`count` messages in the OpenAI chat shape (which Hermes stores), Talaria's shape aside."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    n = 0
    while len(out) < count:
        n += 1
        call_id = f"call_{n}"
        args = json.dumps({"path": f"src/{_text(rng, 20).replace(' ', '_')}.py", "note": _text(rng, 60)})
        out.append({"role": "user", "content": _text(rng, 200)})
        out.append({"role": "assistant", "content": _text(rng, 80), "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "read_file", "arguments": args}}]})
        out.append({"role": "tool", "tool_call_id": call_id, "name": "read_file",
                    "content": json.dumps({"content": _text(rng, 1500)})})
    return out[:count]


def _talaria_store(home: Path, session_id: str, cwd: Path, messages: list[dict[str, Any]],
                   model: str = "openai:canned") -> None:
    from talaria.agent.store import Store

    store = Store(home / "sessions.db")
    store.create_session(session_id, str(cwd), model=model, mode="default")
    store.append(session_id, {"role": "system", "content": "You are Talaria."})
    for m in messages:
        if m.get("tool_calls"):
            m = {**m, "tool_calls": [{"id": c["id"], "name": c["function"]["name"],
                                      "arguments": c["function"]["arguments"]} for c in m["tool_calls"]]}
        if m["role"] == "tool":
            m = {**m, "status": "completed", "display": [{"type": "text", "text": "read"}]}
        store.append(session_id, m)
    store.close()


def _load(env: dict[str, str], cwd: Path, session_id: str, command: list[str] | None) -> tuple[float, float, float]:
    client = RawClient(env, cwd, command)
    client.request("initialize", INIT)
    started = time.perf_counter()
    reply = client.request("session/load", {"sessionId": session_id, "cwd": str(cwd), "mcpServers": []})
    took = time.perf_counter() - started
    if "error" in reply:
        raise RuntimeError(f"session/load failed: {reply['error']}")
    fields = _settled(client.proc.pid)
    client.close()
    return fields["VmRSS"], fields["VmHWM"], took


def _settled(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM (MB) once what follows a load (a count ahead of the first prompt, the
    turn's modules) is done: for SETTLE_S, RSS moved by at most SETTLE_MB and the process
    and its children (the token child) spent at most SETTLE_CPU_S of CPU; at most
    SETTLE_MAX_S. A reading 0.2 s after the answer caught a count ahead part way, a few MB
    more or less from one run to the next."""
    def read() -> tuple[float, float, float]:
        status = Path(f"/proc/{pid}/status").read_text()
        fields = {line.split(":")[0]: int(line.split()[1]) / 1024 for line in status.splitlines()
                  if line.startswith(("VmRSS", "VmHWM"))}
        return fields["VmRSS"], fields["VmHWM"], _cpu_s(pid)

    started = time.monotonic()
    since, first = time.monotonic(), read()
    now = first
    while time.monotonic() - started < SETTLE_MAX_S:
        time.sleep(0.1)
        now = read()
        if abs(now[0] - first[0]) > SETTLE_MB or now[2] - first[2] > SETTLE_CPU_S:
            since, first = time.monotonic(), now
        elif time.monotonic() - since >= SETTLE_S:
            break
    return {"VmRSS": now[0], "VmHWM": now[1]}


def _cpu_s(pid: int) -> float:
    load = tree_load({pid})
    return 0.0 if load is None else load.cpu_s


def session_load() -> Iterator[dict[str, Any]]:
    root = hermes.checkout()
    runs: dict[str, dict[int, list[tuple[float, float, float]]]] = {
        "talaria": {size: [] for size in SIZES}, "hermes": {size: [] for size in SIZES}}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        cwd = base / "project"
        cwd.mkdir()
        # The replay model: no SDK loads after the answer (its ~25 MB would land on a
        # measurement or not, depending on how fast the load was).
        scenario = base / "scenario.json"
        scenario.write_text(json.dumps({"turns": [{"text": "ok"}]}))
        for size in SIZES:
            messages = conversation(size)
            _talaria_store(base / f"talaria-{size}", f"load-{size}", cwd, messages,
                           model=f"replay:{scenario}")
            if root is not None:
                (base / f"hermes-{size}").mkdir()
                with hermes.HermesProcess(root, _HERMES_DRIVER,
                                          env={"HERMES_HOME": str(base / f"hermes-{size}")}) as h:
                    h.call("store", session_id=f"load-{size}", cwd=str(cwd), messages=messages)
        for n in range(ROUNDS):  # the agents and sizes take turns: load drift hits all alike
            for size in SIZES:
                # A copy as stored, each round: a load keeps the count it made ahead with the
                # session, and the next load of it would not count (nor hold what counting leaves)
                home = base / f"talaria-{size}-{n}"
                shutil.copytree(base / f"talaria-{size}", home)
                env = child_env(TALARIA_HOME=str(home), TALARIA_MODEL=f"replay:{scenario}")
                runs["talaria"][size].append(_load(env, cwd, f"load-{size}", None))
                if root is not None:
                    runs["hermes"][size].append(_load(
                        hermes_env(child_env(), str(base / f"hermes-{size}")), cwd,
                        f"load-{size}", hermes_command(root)))
    yield from _figures(runs)


def _figures(runs: dict[str, dict[int, list[tuple[float, float, float]]]]) -> Iterator[dict[str, Any]]:
    median = statistics.median
    for size in SIZES:
        messages = conversation(size)
        text_kb = sum(len(m["content"]) + sum(len(c["function"]["arguments"])
                                              for c in m.get("tool_calls") or ())
                      for m in messages) / len(messages) / 1024
        out: dict[str, Any] = {"metric": "session_load_rss_mb", "messages": size,
                               "text_kb_per_message": round(text_kb, 2), "rounds": ROUNDS}
        growth: dict[str, float] = {}
        for who, got in runs.items():
            if not got[size]:
                continue
            rss = [r[0] for r in got[size]]
            # each round's growth from its own smallest load
            grew = [r - small[0] for r, small in zip(rss, got[SIZES[0]], strict=True)]
            growth[who] = median(grew)
            per = growth[who] * 1024 / (size - SIZES[0]) if size > SIZES[0] else None
            out[who] = {"rss": round(median(rss), 1), "hwm": round(median(r[1] for r in got[size]), 1),
                        "load_s": round(median(r[2] for r in got[size]), 3),
                        "growth": round(growth[who], 1), "growth_per_round": [round(g, 1) for g in grew],
                        "kb_per_message": None if per is None else round(per, 2)}
            if who == "talaria" and per is not None:
                out[who] |= {"overhead_kb_per_message": round(per - text_kb, 2),
                             "target_overhead_kb": OVERHEAD_KB_PER_MESSAGE}
        if size > SIZES[0] and growth.get("hermes"):
            out["growth_vs_hermes"] = round(growth["talaria"] / growth["hermes"], 2)
        yield out


BENCHMARKS = {"session_load_memory": session_load}
