"""The learning loop end to end (issue 26 point 4), as a user runs it: real `talaria` commands,
real worker processes and checks on the sample Harbor tasks (`--env local`: Harbor's paths
mapped), the fake LLM on loopback answering as the scripted teacher, reviewer and student of
benchmarks/learning_loop.py.

teacher run -> `skills learn` (a skill per solved task, provenance kept) -> a run with the set
and one with `--skills none` -> `skills curate --set` keeps the skill whose tasks did better
and archives the one whose did not. Then bad input: one line, exit 2, nothing changed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.learning_loop import config_toml, dataset, scripted_turn
from tests import ROOT
from tests.batchllm import RoutedLLM


class Recording(RoutedLLM):
    """The routed fake LLM, keeping each request's model and tool names."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, set[str], str]] = []
        super().__init__(self.answer)

    def answer(self, body: dict) -> dict:
        tools = {t["function"]["name"] for t in body.get("tools") or ()}
        self.seen.append((str(body.get("model")), tools, str(body["messages"][0]["content"])))
        return scripted_turn(body)


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    root = tmp_path_factory.mktemp("learning-loop")
    home = root / "home"
    home.mkdir()
    (home / "config.toml").write_text(config_toml())
    data = dataset(root / "dataset")
    with Recording() as llm:
        env = {**os.environ, "TALARIA_HOME": str(home), "OPENAI_API_KEY": "sk-test",
               "OPENAI_BASE_URL": llm.openai_base_url, "PYTHONPATH": str(ROOT)}

        def talaria(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "talaria.acp_server.cli.main", *args],
                                  env=env, cwd=root, capture_output=True, text=True, timeout=300)

        def batch(name: str, model: str, *extra: str) -> subprocess.CompletedProcess[str]:
            return talaria("batch", str(data), "--run-name", name, "--env", "local",
                           "--workers", "2", "--model", model, *extra)

        state = {"root": root, "home": home, "data": data, "llm": llm, "talaria": talaria,
                 "batch": batch, "done": {}}
        state["done"]["teacher"] = batch("teacher", "openai:teacher")
        mark = len(llm.seen)
        state["done"]["learn"] = talaria("skills", "learn", "data/teacher", "--into", "samples",
                                         "--model", "openai:teacher", "--json")
        state["reviews"] = llm.seen[mark:]
        mark = len(llm.seen)
        state["done"]["with"] = batch("with", "openai:student", "--skills", "samples")
        state["with_requests"] = llm.seen[mark:]
        mark = len(llm.seen)
        state["done"]["without"] = batch("without", "openai:student", "--skills", "none")
        state["without_requests"] = llm.seen[mark:]
        yield state


def lines(run_dir: Path) -> dict[str, dict]:
    rows = [json.loads(x) for x in (run_dir / "trajectories.jsonl").read_text().splitlines()]
    return {r["task_id"]: r for r in rows}


def test_the_teacher_solves_and_learn_writes_a_skill_per_solved_task(loop: dict) -> None:
    assert loop["done"]["teacher"].returncode == 0, loop["done"]["teacher"].stderr
    teacher = lines(loop["root"] / "data" / "teacher")
    assert {k: r["resolved"] for k, r in teacher.items()} == {"hello-world": True, "fizzbuzz": True}
    learned = loop["done"]["learn"]
    assert learned.returncode == 0, learned.stderr
    report = json.loads(learned.stdout)
    changes = {t["task_id"]: t["changes"] for t in report["tasks"]}  # in the run's order
    assert changes == {"fizzbuzz": ["Saved skill `python-cli-script`"],
                       "hello-world": ["Saved skill `write-exact-file`"]}
    # Each review: the skill tools only (no memory, no files), the set's index in its prompt:
    # the second review was offered the skill the first one saved.
    tools = {frozenset(t) for _, t, _ in loop["reviews"]}
    assert tools == {frozenset({"skills_list", "skill_view", "skill_manage"})}
    first = changes[report["tasks"][0]["task_id"]][0].split("`")[1]
    assert f"- {first}:" in loop["reviews"][-1][2] and f"- {first}:" not in loop["reviews"][0][2]
    folder = loop["home"] / "skill-sets" / "samples"
    run = str((loop["root"] / "data" / "teacher").resolve())
    (entry,) = json.loads((folder / "write-exact-file" / "provenance.json").read_text())
    assert (entry["run"], entry["task"], entry["attempt"], entry["action"]) == (
        run, "hello-world", 1, "create")
    ledger = json.loads((folder / "set.json").read_text())
    assert ledger["learned"][0]["run"] == run and len(ledger["learned"][0]["tasks"]) == 2
    assert not (loop["home"] / "skills").exists()  # the user's own skills were not touched
    listed = loop["talaria"]("skills", "list", "--set", "samples")
    assert "write-exact-file (learned from hello-world)" in listed.stdout


def test_a_run_with_the_set_reads_it_and_records_it(loop: dict) -> None:
    assert loop["done"]["with"].returncode == 0, loop["done"]["with"].stderr
    got = lines(loop["root"] / "data" / "with")
    assert {k: (r["resolved"], r["skills"]) for k, r in got.items()} == {
        "hello-world": (True, "samples"), "fizzbuzz": (True, "samples")}
    # Read-only: the skills can be listed and viewed, not changed, by a measured run.
    tools = set().union(*(t for _, t, _ in loop["with_requests"]))
    assert {"skills_list", "skill_view"} <= tools and "skill_manage" not in tools
    checkpoint = json.loads((loop["root"] / "data" / "with" / "checkpoint.json").read_text())
    assert checkpoint["options"]["skills"] == "samples"
    assert checkpoint["skill_set"]["skills"] == {"python-cli-script": 1, "write-exact-file": 1}


def test_a_run_with_none_has_no_skills_at_all(loop: dict) -> None:
    assert loop["done"]["without"].returncode == 0, loop["done"]["without"].stderr
    got = lines(loop["root"] / "data" / "without")
    assert {k: (r["resolved"], r["skills"]) for k, r in got.items()} == {
        "hello-world": (False, "none"), "fizzbuzz": (True, "none")}
    for _, tools, system in loop["without_requests"]:
        assert not tools & {"skills_list", "skill_view", "skill_manage"}
        assert "write-exact-file" not in system


def test_curate_keeps_what_beat_the_baseline_and_archives_the_rest(loop: dict) -> None:
    talaria = loop["talaria"]
    args = ("skills", "curate", "--set", "samples", "--with", "data/with", "--baseline",
            "data/without")
    dry = talaria(*args, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    report = json.loads(dry.stdout)
    assert {v["skill"]: (v["tasks"], v["with_set"], v["baseline"], v["beats_baseline"])
            for v in report["skills"]} == {
        "python-cli-script": (["fizzbuzz"], 1.0, 1.0, False),
        "write-exact-file": (["hello-world"], 1.0, 0.0, True)}
    folder = loop["home"] / "skill-sets" / "samples"
    assert report["archived"] == ["python-cli-script"] and (folder / "python-cli-script").is_dir()
    done = talaria(*args)
    assert done.returncode == 0, done.stderr
    assert "python-cli-script: used on 1 task(s); resolved 1.00 with the set vs 1.00 without: " \
           "archived" in done.stdout
    assert not (folder / "python-cli-script").exists()
    assert (folder / ".archive" / "python-cli-script" / "provenance.json").is_file()
    assert (folder / "write-exact-file" / "SKILL.md").is_file()


@pytest.mark.parametrize(("args", "says"), [
    (("skills", "learn", "data/nope", "--into", "fresh"), "no batch run at data/nope"),
    (("skills", "learn", "data/teacher", "--into", "none"), "`none` means no skills at all"),
    (("skills", "learn", "data/teacher"), "talaria skills learn RUN --into SET"),
    (("skills", "list", "--set", "nope"), "no skill set 'nope'"),
    (("skills", "curate", "--set", "samples", "--with", "data/without", "--baseline",
      "data/with"), "ran --skills none, not --skills samples"),
    (("skills", "curate", "--set", "samples", "--with", "data/with", "--baseline",
      "data/teacher"), "ran without --skills: the baseline is a run of the same tasks"),
    (("skills", "curate", "--set", "samples", "--with", "data/with"),
     "curate --set SET --with RUN --baseline RUN"),
    (("batch", "DATA", "--run-name", "x", "--env", "local", "--model", "openai:student",
      "--skills", "nope"), "--skills nope: no skill set 'nope'"),
])
def test_bad_input_is_one_line_and_changes_nothing(loop: dict, args: tuple, says: str) -> None:
    folder = loop["home"] / "skill-sets"
    before = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if ".lock" not in p.name)
    args = tuple(str(loop["data"]) if a == "DATA" else a for a in args)
    done = loop["talaria"](*args)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and says in done.stderr, done.stderr
    after = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if ".lock" not in p.name)
    assert after == before and not (loop["root"] / "data" / "x").exists()
    assert not (folder / "fresh").exists()


def test_learning_from_a_run_with_nothing_solved_is_refused(loop: dict) -> None:
    unsolved = loop["root"] / "data" / "unsolved"
    unsolved.mkdir()
    row = lines(loop["root"] / "data" / "without")["hello-world"]
    (unsolved / "trajectories.jsonl").write_text(json.dumps(row) + "\n")
    done = loop["talaria"]("skills", "learn", str(unsolved), "--into", "fresh")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "nothing to learn from" in done.stderr and "1 checked attempt(s), none resolved" \
        in done.stderr
    assert not (loop["home"] / "skill-sets" / "fresh").exists()
