"""Self-improvement costs (issue 12).

`skills_prompt`: tokens (cl100k) the skills section adds to the system prompt with 100
installed skills (real SKILL.md folders, descriptions of 150-400 characters); target 1,500.
Also the time to scan the library and build the section, paid once per session.

`review_overhead`: the user-visible turn (a `session/prompt` round trip through a real `talaria
acp` over the real OpenAI SDK, against a canned endpoint) with the background review on and
off; with `memory_review_interval = 1` a review is due after every turn (one runs at a time).
The next prompt comes `THINK_S` after an answer; `reviews_run` counts the reviews' model calls.
Target: the medians differ by at most 1 ms over 20 turns.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SKILLS = 100
TURNS = 20
ROUNDS = 3
THINK_S = 0.3
"""Pause between a turn's answer and the next prompt (a quick user): the review runs in it."""
TOKENS_TARGET = 1_500
OVERHEAD_TARGET_MS = 1.0
VERBS = ["parse", "configure", "deploy", "migrate", "benchmark", "profile", "refactor", "document",
         "release", "audit"]
NOUNS = ["postgres", "docker", "terraform", "pytest", "webpack", "kafka", "redis", "nginx", "celery",
         "grafana"]


def _library(home: Path) -> None:
    for i in range(SKILLS):
        verb, noun = VERBS[i % 10], NOUNS[i // 10]
        name = f"{verb}-{noun}-{i}"
        description = (f"Use when the user asks to {verb} {noun} in a project: the commands, the "
                       f"checks to run before and after, and the failures seen before. ") * (1 + i % 3)
        folder = home / "skills" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {description[:400].strip()}\n---\n\n# Steps\n" +
            "".join(f"{n}. Step {n} of {verb} {noun}.\n" for n in range(1, 30)))


def skills_prompt() -> Iterator[dict[str, Any]]:
    from talaria.agent.context import tokens
    from talaria.agent.skills.index import skills_section
    from talaria.tools.skills.store import SkillStore

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        _library(home)
        tokens.count("warm up the encoding")
        for window in (32_768, 128_000, 1_000_000):
            started = time.perf_counter()
            section = skills_section(list(SkillStore(home).scan().values()), window)
            elapsed = time.perf_counter() - started
            yield {"metric": "skills_prompt_tokens", "skills": SKILLS, "context_window": window,
                   "tokens": tokens.count(section), "chars": len(section),
                   "listed": section.count("\n- "), "target": TOKENS_TARGET,
                   "build_ms": round(elapsed * 1000, 1)}


def _turns(env: dict[str, str], root: Path) -> dict[str, list[float]]:
    """Prompt round trips of two sessions of one agent, the review on in one and off (the
    session option) in the other, their turns interleaved: same process, same load."""
    from benchmarks.stall import INIT, _Agent

    agent = _Agent(env, root)
    agent.request("initialize", INIT)
    sessions = {}
    for mode in ("on", "off"):
        new = agent.request("session/new", {"cwd": str(root), "mcpServers": []})
        sessions[mode] = new["result"]["sessionId"]
        agent.request("session/set_config_option", {"sessionId": sessions[mode],
                                                    "configId": "self_improvement", "value": mode})
        agent.request("session/prompt", _prompt(sessions[mode]))  # the first loads the SDK
    times: dict[str, list[float]] = {"on": [], "off": []}
    for turn in range(TURNS):
        for mode in ("on", "off") if turn % 2 else ("off", "on"):
            time.sleep(THINK_S)
            started = time.perf_counter()
            answer = agent.request("session/prompt", _prompt(sessions[mode]))
            times[mode].append(time.perf_counter() - started)
            assert answer["result"]["stopReason"] == "end_turn", answer
    agent.close()
    return times


def _prompt(session: str) -> dict[str, Any]:
    return {"sessionId": session, "prompt": [{"type": "text", "text": "hello"}]}


def review_overhead() -> Iterator[dict[str, Any]]:
    from benchmarks.canned_llm import CannedLLM

    rounds = []
    reviews = 0
    with CannedLLM("Noted.", delay=0.01) as llm:
        for _ in range(ROUNDS):
            with tempfile.TemporaryDirectory() as tmp:
                root = Path(tmp)
                env = {**os.environ, "TALARIA_HOME": str(root / "home"),
                       "TALARIA_MODEL": "openai:fake", "OPENAI_API_KEY": "x",
                       "OPENAI_BASE_URL": llm.openai_base_url,
                       "TALARIA_MEMORY_REVIEW_INTERVAL": "1",
                       "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
                served = llm.served
                times = _turns(env, root)
                reviews += llm.served - served - 2 * (TURNS + 1)
                rounds.append({m: statistics.median(t) for m, t in times.items()})
    on = statistics.median(r["on"] for r in rounds)
    off = statistics.median(r["off"] for r in rounds)
    difference = statistics.median(r["on"] - r["off"] for r in rounds)
    yield {"metric": "review_overhead_ms", "median_on": round(on * 1000, 2),
           "median_off": round(off * 1000, 2), "difference": round(difference * 1000, 2),
           "target": OVERHEAD_TARGET_MS, "turns": TURNS, "rounds": ROUNDS, "think_s": THINK_S,
           "reviews_run": reviews,
           "note": "session/prompt round trips, review on and off in two sessions of one agent, "
                   "interleaved; the review runs after each answer of the 'on' session"}


BENCHMARKS = {"skills_prompt": skills_prompt, "review_overhead": review_overhead}
