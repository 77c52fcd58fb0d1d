"""Self-improvement, measured (issue 26 point 4): the learning loop on the sample Harbor tasks
(examples/harbor: hello-world, fizzbuzz; `--env local`, Harbor's paths mapped) with a scripted
model, `scripted_turn` below, served over the real OpenAI SDK (benchmarks/scripted_llm.py):

    1. teacher   `talaria batch` with `openai:teacher`: careful, solves both (4 calls each)
    2. learn     `talaria skills learn data/teacher --into samples`: one review per solved task,
                 each saving one skill (skill_manage create), then saying so
    3. with      `talaria batch --skills samples` with `openai:student`: a skill it is offered
                 for its task is viewed (skill_view), then followed
    4. without   `talaria batch --skills none`, the same student: no skill; it writes
                 "Hello world" (unsolved) and explores before writing fizzbuzz.py
    5. curate    `talaria skills curate --set samples --with ... --baseline ...`

`learning_loop` reports, per run, model calls, tokens and cost per solved task (prices: teacher
$3/$15, student $0.25/$1.25 per M tokens; tokens at about four characters each), the reviews'
calls and cost, and what curate kept.

What a scripted model can show: that the loop runs end to end on real tasks and real checks,
that a learned skill reaches a student's prompt and is viewed, that every figure (calls,
tokens, cost, verdicts) is counted from the runs, and that curation follows the verdicts. What
it cannot: whether skills help a real model. The student here behaves better with a skill
because it was written to; the difference in calls and cost is the script's, not evidence.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ("hello-world", "fizzbuzz")
PRICES = {"openai:teacher": (3.0, 15.0), "openai:student": (0.25, 1.25)}
FIZZBUZZ = ("import sys\n\nfor i in range(1, int(sys.argv[1]) + 1):\n"
            "    print((\"Fizz\" if i % 3 == 0 else \"\") + (\"Buzz\" if i % 5 == 0 else \"\") or i)\n")
FILES = {"hello": ("hello.txt", "Hello, world!\n"), "fizzbuzz": ("fizzbuzz.py", FIZZBUZZ)}
CHECKS = {"hello": "cat hello.txt", "fizzbuzz": "python3 fizzbuzz.py 15"}
SKILLS = {
    "hello": ("write-exact-file", "Use when a task asks for a file with exact contents (a "
              "greeting, a config line) that must match character for character.",
              "1. Copy the required text exactly: case, punctuation, spaces.\n"
              "2. Write it with write_file, then read it back before answering.\n"),
    "fizzbuzz": ("python-cli-script", "Use when a task asks for a Python program that takes "
                 "command-line arguments and prints lines.",
                 "1. Read the arguments from sys.argv (convert numbers with int).\n"
                 "2. Print one result per line; run it once with a sample argument.\n"),
}


def task_of(text: str) -> str | None:
    return next((task for task, (path, _) in FILES.items() if path in text), None)


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(part.get("text") or "") for part in content)
    return str(content or "")


def scripted_turn(body: dict[str, Any]) -> dict[str, Any]:
    """The scripted teacher, student and reviewer: the next turn for this request."""
    messages = body.get("messages") or []
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if users and _text(messages[users[-1]]).startswith("[Skill learning"):
        return _review(messages, messages[users[-1] + 1:])
    task = task_of(_text(messages[users[0]])) if users else None
    if task is None:
        return {"text": "Nothing to do."}
    done = sum(m.get("role") == "tool" for m in messages)
    plan = _plan(task, str(body.get("model")), _offered(body, SKILLS[task][0]))
    return plan[done] if done < len(plan) else {"text": f"Done: {FILES[task][0]} is written."}


def _plan(task: str, model: str, skill: bool) -> list[dict[str, Any]]:
    path, right = FILES[task]
    write = _call("write_file", path=path, content=right)
    if model == "teacher":
        return [_call("terminal", command="ls -la"), write, _call("terminal", command=CHECKS[task])]
    if skill:
        return [_call("skill_view", name=SKILLS[task][0]), write]
    if task == "hello":  # the student's slip, without the skill that says "exactly"
        return [_call("write_file", path=path, content="Hello world\n")]
    return [_call("terminal", command="ls -la"), _call("terminal", command="python3 --version"),
            write]


def _offered(body: dict[str, Any], skill: str) -> bool:
    """The skill is in the system prompt's index and skill_view is among the tools."""
    tools = {t.get("function", {}).get("name") for t in body.get("tools") or ()}
    system = next((_text(m) for m in body.get("messages") or () if m.get("role") == "system"), "")
    return "skill_view" in tools and f"{skill}:" in system


def _review(messages: list[dict[str, Any]], since: list[dict[str, Any]]) -> dict[str, Any]:
    if any(m.get("role") == "tool" for m in since):
        return {"text": "Saved the procedure as a skill."}
    task = next((t for m in messages if m.get("role") == "user" and (t := task_of(_text(m)))), None)
    if task is None:
        return {"text": "Nothing to save."}
    name, description, body = SKILLS[task]
    content = f"---\nname: {name}\ndescription: {description}\n---\n\n{body}"
    return _call("skill_manage", action="create", name=name, content=content)


def _call(tool: str, /, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def dataset(into: Path) -> Path:
    for name in SAMPLES:
        shutil.copytree(ROOT / "examples" / "harbor" / name, into / name)
    return into


def config_toml() -> str:
    return "".join(f'[prices."{model}"]\ninput = {i}\noutput = {o}\n'
                   for model, (i, o) in PRICES.items())


def run_summary(run_dir: Path) -> dict[str, Any]:
    """Solved tasks, model calls and cost of a batch run, and per solved task."""
    lines = [json.loads(x) for x in (run_dir / "trajectories.jsonl").read_text().splitlines()]
    solved = sum(bool(r.get("resolved")) for r in lines)
    calls = sum(int(r.get("turns") or 0) for r in lines)
    cost = sum(float(r.get("cost_usd") or 0.0) for r in lines)
    tokens = {key: sum(int((r.get("tokens") or {}).get(key) or 0) for r in lines)
              for key in ("input", "output")}
    return {"tasks": len(lines), "solved": solved, "model_calls": calls,
            "input_tokens": tokens["input"], "output_tokens": tokens["output"],
            "cost_usd": round(cost, 6),
            "calls_per_solved": round(calls / solved, 3) if solved else None,
            "cost_per_solved_usd": round(cost / solved, 6) if solved else None}


def learning_loop() -> Iterator[dict[str, Any]]:
    from benchmarks.scripted_llm import ScriptedLLM

    with tempfile.TemporaryDirectory(prefix="talaria-bench-learn-") as tmp, \
            ScriptedLLM(scripted_turn) as llm:
        root = Path(tmp)
        home = root / "home"
        home.mkdir()
        (home / "config.toml").write_text(config_toml())
        data = dataset(root / "dataset")
        env = {**os.environ, "TALARIA_HOME": str(home), "OPENAI_API_KEY": "sk-bench",
               "OPENAI_BASE_URL": llm.openai_base_url, "PYTHONPATH": str(ROOT)}

        def talaria(*args: str) -> subprocess.CompletedProcess[str]:
            done = subprocess.run([sys.executable, "-m", "talaria.acp_server.cli.main", *args],
                                  env=env, cwd=root, capture_output=True, text=True, timeout=600)
            if done.returncode not in (0, 1):
                raise RuntimeError(f"talaria {args[0]}: {done.stderr.strip()}")
            return done

        def batch(name: str, model: str, *extra: str) -> dict[str, Any]:
            talaria("batch", str(data), "--run-name", name, "--env", "local", "--workers", "2",
                    "--model", model, *extra)
            return run_summary(root / "data" / name)

        teacher = batch("teacher", "openai:teacher")
        before = len(llm.requests)
        talaria("skills", "learn", "data/teacher", "--into", "samples", "--model", "openai:teacher")
        reviews = llm.requests[before:]
        learned = json.loads(talaria("skills", "list", "--set", "samples", "--json").stdout)
        with_set = batch("with", "openai:student", "--skills", "samples")
        without = batch("without", "openai:student", "--skills", "none")
        curated = json.loads(talaria("skills", "curate", "--set", "samples", "--with", "data/with",
                                     "--baseline", "data/without", "--json").stdout)
    yield {"name": "learning_loop", "model": "scripted (benchmarks/learning_loop.py)",
           "tasks": list(SAMPLES), "teacher": teacher,
           "learn": {"review_model_calls": len(reviews), "cost_usd": _cost(reviews, "openai:teacher"),
                     "skills": [s["name"] for s in learned]},
           "with_skills": with_set, "without_skills": without,
           "curate": {"archived": curated["archived"],
                      "verdicts": {v["skill"]: v["beats_baseline"] for v in curated["skills"]}},
           "note": "a scripted student does better with a skill because it was written to; "
                   "this measures the loop and its bookkeeping, not whether skills help a model"}


def _cost(requests: list[dict[str, Any]], model: str) -> float:
    """What the reviews' calls cost (they are in no run's lines): the endpoint's own usage
    estimate for each request, at `model`'s price."""
    from talaria.agent.providers.replay import turn_usage

    price_in, price_out = PRICES[model]
    total = 0.0
    for body in requests:
        usage = turn_usage(scripted_turn(body), len(json.dumps(body)))
        total += (usage.input_tokens * price_in + usage.output_tokens * price_out) / 1e6
    return round(total, 6)


BENCHMARKS = {"learning_loop": learning_loop}
