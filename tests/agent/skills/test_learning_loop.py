"""The learning loop end to end, through the real loop, tools and review (the model is a
scripted policy behind the fake LLM's HTTP): a session solves a multi-step task by exploring;
the background review saves one valid skill with provenance; a second session on a similar
task sees the skill in its prompt list, views it, follows it, and needs fewer model calls than
the same session without the skill.

The policy is what a model does with what it is sent: it looks for a matching skill in the
system prompt's list, views it, and runs the steps it reads in the tool result; without one it
explores. So the saving comes only from what the agent delivered (prompt list, view, steps).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import anyio

from talaria.agent.config import load_config
from talaria.agent.loop import run_turn
from talaria.agent.skills.review import after_turn
from talaria.tools.skills.format import parse
from tests.fakellm import FakeLLM
from tests.helpers import make_session

PY = sys.executable
CHECK = "import pathlib, sys\nsys.exit(pathlib.Path('config.ini').read_text().strip() != 'seed=1')\n"
SKILL = f"""---
name: fix-build-seed
description: Make check.py pass when the build fails for want of a seeded config.ini
---
# Steps
- write_file config.ini: seed=1
- terminal: {PY} check.py
"""
EXPLORE = [
    ("search_files", {"pattern": "seed"}),
    ("read_file", {"path": "README.md"}),
    ("terminal", {"command": f"{PY} check.py"}),
    ("write_file", {"path": "config.ini", "content": "seed=1\n"}),
    ("terminal", {"command": f"{PY} check.py"}),
]


def text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content)


def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args}]}


def policy(body: dict[str, Any]) -> dict[str, Any]:
    messages = body["messages"]
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    since = messages[last_user + 1:]
    results = [m for m in since if m["role"] == "tool"]
    if "Background review" in text(messages[last_user]["content"]):
        if results:
            return {"text": "Saved."}
        return call("skill_manage", {"action": "create", "name": "fix-build-seed", "content": SKILL})
    system = text(messages[0]["content"])
    if "- fix-build-seed:" in system:
        if not results:
            return call("skill_view", {"name": "fix-build-seed"})
        steps = re.findall(r"^- (write_file|terminal)(?: (\S+))?: (.+)$",
                           json.loads(results[0]["content"])["content"], re.MULTILINE)
        done = len(results) - 1
        if done < len(steps):
            kind, path, value = steps[done]
            if kind == "write_file":
                return call("write_file", {"path": path, "content": value + "\n"})
            return call("terminal", {"command": value})
        return {"text": "Build passes."}
    if len(results) < len(EXPLORE):
        return call(*EXPLORE[len(results)])
    return {"text": "Build passes."}


def project(root: Path) -> None:
    folder = root / "project"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "check.py").write_text(CHECK)
    (folder / "README.md").write_text("The build reads config.ini; its seed must be 1.\n")
    (folder / "config.ini").unlink(missing_ok=True)


def solve(llm: FakeLLM, root: Path, *, review: bool = False) -> tuple[Any, int]:
    """One session on the task; (session, model calls of the user's turn)."""
    project(root)
    session = make_session(llm, root, skill_review_interval=5)
    config = load_config({"skill_review_interval": 5}, env={"TALARIA_HOME": str(root / ".home")})
    before = len(llm.requests)

    async def go() -> Any:
        assert await run_turn(session, "make check.py pass") == "end_turn"
        return after_turn(session, config)

    pending = anyio.run(go)
    calls = len(llm.requests) - before
    if review:
        assert pending is not None
        anyio.run(pending)
    assert (root / "project/config.ini").read_text() == "seed=1\n"
    return session, calls


def test_a_learned_skill_makes_the_next_session_shorter(fake_llm: FakeLLM, tmp_path: Path) -> None:
    fake_llm.responder = policy
    first, explored = solve(fake_llm, tmp_path / "learner", review=True)
    skill = tmp_path / "learner/.home/skills/fix-build-seed/SKILL.md"
    meta, _ = parse(skill.read_text(), "fix-build-seed")
    assert meta["metadata"]["created_by"] == "review"
    assert meta["metadata"]["created_session"] == f"{first.id}-review"

    second, guided = solve(fake_llm, tmp_path / "learner")
    assert "- fix-build-seed: Make check.py pass" in second.messages[0]["content"]
    names = [c["name"] for m in second.messages for c in m.get("tool_calls") or ()]
    assert names == ["skill_view", "write_file", "terminal"]

    _, control = solve(fake_llm, tmp_path / "control")  # the same task, nothing learned
    assert control == explored == 6
    assert guided == 4 < control
