"""Trajectory loading and the three export formats, against golden files.

The fixture `golden/transcript.jsonl` is a synthetic transcript with reasoning, parallel tool
calls, failed tools (a missing file, invalid JSON arguments), an image in a user message and
in a tool result, a compaction event and a secret in a tool output.
Regenerate the goldens after an intended change: TALARIA_UPDATE_GOLDEN=1 pytest tests/test_export.py
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from talaria.agent.pricing import Price
from talaria.agent.store import Store
from talaria.agent.trajectories.export import ToolCatalog, export
from talaria.agent.trajectories.export.atif import to_atif, validate
from talaria.agent.trajectories.export.sharegpt import parse_sharegpt
from talaria.agent.trajectories.load import load_trajectory, load_trajectory_file, write_transcript
from talaria.agent.trajectories.model import TrajectoryNotFound, build
from tests import TESTS
from tests.helpers import check_golden

GOLDEN = TESTS / "golden"
FIXTURE = GOLDEN / "transcript.jsonl"
T0 = 1_760_000_000.0


def _tool(name: str, description: str, **props: str) -> dict:
    return {"name": name, "description": description, "parameters": {
        "type": "object", "properties": {k: {"type": v} for k, v in props.items()},
        "required": list(props)}}


# Fixed definitions, so a reworded built-in tool does not churn the goldens.
CATALOG = ToolCatalog(
    definitions=(
        _tool("read_file", "Read a text file with line numbers.", path="string"),
        _tool("write_file", "Create or overwrite a file.", path="string", content="string"),
        _tool("patch", "Replace text in a file.", path="string", old="string", new="string"),
        _tool("terminal", "Run a shell command.", command="string"),
    ),
    toolsets={"read_file": "core", "write_file": "core", "patch": "core", "terminal": "core"},
)


def fixture_trajectory():
    traj = load_trajectory_file(FIXTURE)
    times = tuple(T0 + 1.5 * i for i in range(len(traj.messages)))
    compactions = tuple(e | {"time": T0 + 11.0} for e in traj.compactions)
    return dataclasses.replace(traj, session_id="sess-golden", times=times, created_at=T0,
                               compactions=compactions, title="Fix the header colour")


@pytest.mark.parametrize(("fmt", "name"), [
    ("sharegpt", "export.sharegpt.jsonl"), ("openai", "export.openai.jsonl"),
    ("atif", "export.atif.json"),
])
def test_exports_match_goldens(fmt: str, name: str, monkeypatch) -> None:
    monkeypatch.setattr("talaria.agent.trajectories.export.atif._version", lambda: "0.0.0-test")
    check_golden(name, export([fixture_trajectory()], fmt, CATALOG))


def test_fixture_trajectory_summary() -> None:
    traj = load_trajectory_file(FIXTURE)
    assert traj.status == "completed" and traj.api_calls == 7
    assert traj.tool_stats == {"read_file": {"count": 3, "success": 2, "failure": 1},
                               "terminal": {"count": 3, "success": 2, "failure": 1},
                               "patch": {"count": 1, "success": 1, "failure": 0}}
    assert traj.totals()["cache_read_tokens"] == 107_032
    (event,) = traj.compactions
    assert traj.messages[event["at"]]["content"].startswith("The logo is blue")
    assert all(m["role"] != "event" for m in traj.messages)


def test_sharegpt_line_is_hermes_shaped() -> None:
    line = json.loads(export([fixture_trajectory()], "sharegpt", CATALOG))
    assert list(line) == ["prompt_index", "conversations", "metadata", "completed", "partial",
                          "api_calls", "toolsets_used", "tool_stats", "tool_error_counts",
                          "subagents", "reward", "resolved", "cost_usd"]
    # Hermes' fields, then ours: delegate_task's children, the outcome (no verdict, no price)
    assert line["subagents"] == [] and (line["reward"], line["resolved"], line["cost_usd"]) == (
        None, None, None)
    turns = line["conversations"]
    assert [t["from"] for t in turns[:5]] == ["system", "human", "gpt", "tool", "gpt"]
    system = turns[0]["value"]
    tools = json.loads(system[system.index("<tools>\n") + 8: system.index("\n</tools>")])
    assert [t["name"] for t in tools] == CATALOG.names and tools[0]["required"] is None
    first = turns[2]["value"]
    assert first.startswith("<think>\nThe screenshot shows") and first.count("<tool_call>") == 2
    # Both results of one model turn in one `tool` turn.
    assert turns[3]["value"].count("<tool_response>") == 2
    assert turns[1]["value"].endswith("<image>")
    assert line["tool_stats"]["write_file"] == {"count": 0, "success": 0, "failure": 0}
    assert line["tool_error_counts"] == {"read_file": 1, "write_file": 0, "patch": 0, "terminal": 1}
    assert line["metadata"]["timestamp"] == "2025-10-09T08:53:20.000Z"


def test_sharegpt_parses_back_turn_for_turn() -> None:
    traj = fixture_trajectory()
    parsed = parse_sharegpt(export([traj], "sharegpt", CATALOG))
    original = [m for m in traj.messages if m["role"] != "system"]
    assert [m["role"] for m in parsed[1:]] == [m["role"] for m in original]
    for got, want in zip(parsed[1:], original, strict=True):
        if want["role"] == "assistant":
            assert got["content"] == want["content"].strip()
            assert got.get("reasoning") == want.get("reasoning")
            assert [(c["id"], c["name"]) for c in got.get("tool_calls", [])] == \
                [(c["id"], c["name"]) for c in want.get("tool_calls", [])]
        elif want["role"] == "tool":
            assert got["tool_call_id"] == want["tool_call_id"] and got["name"] == want["name"]


def test_openai_messages_carry_wire_fields_only() -> None:
    line = json.loads(export([fixture_trajectory()], "openai", CATALOG))
    allowed = {"system": {"role", "content"}, "user": {"role", "content"},
               "assistant": {"role", "content", "tool_calls"},
               "tool": {"role", "tool_call_id", "content"}}
    messages = line["messages"]
    for message in messages:
        assert set(message) <= allowed[message["role"]], message
    assert line["tools"][0] == {"type": "function", "function": CATALOG.definitions[0]}
    image = messages[1]["content"][1]
    assert image["type"] == "image_url" and image["image_url"]["url"].startswith("data:image/png;base64,")
    # Every assistant tool call is answered by the tool messages right after it; the image a
    # tool returned follows them as a user message.
    for i, message in enumerate(messages):
        if message.get("tool_calls"):
            ids = [c["id"] for c in message["tool_calls"]]
            answers = messages[i + 1: i + 1 + len(ids)]
            assert [m.get("tool_call_id") for m in answers] == ids
            assert all(c["type"] == "function" for c in message["tool_calls"])
    tool_image = messages[8]
    assert tool_image["role"] == "user" and tool_image["content"][1]["type"] == "image_url"


def test_atif_document_follows_the_spec() -> None:
    doc = to_atif(fixture_trajectory(), agent_version="1.0", catalog=CATALOG)
    validate(doc)  # the atif package's models: the whole document
    assert doc["schema_version"] == "ATIF-v1.8" and doc["session_id"] == "sess-golden"
    tools = doc["agent"].pop("tool_definitions")
    assert doc["agent"] == {"name": "talaria", "version": "1.0", "model_name": "openai:gpt-test"}
    assert [t["function"]["name"] for t in tools] == CATALOG.names
    steps = doc["steps"]
    assert [s["step_id"] for s in steps] == list(range(1, len(steps) + 1))
    agent_only = {"model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics"}
    step_fields = {"step_id", "timestamp", "source", "message", "observation", "extra"} | agent_only
    for step in steps:
        assert set(step) <= step_fields and step["source"] in ("system", "user", "agent")
        assert isinstance(step["message"], str)
        if step["source"] != "agent":
            assert not set(step) & agent_only
        ids = {c["tool_call_id"] for c in step.get("tool_calls", [])}
        for call in step.get("tool_calls", []):
            assert set(call) == {"tool_call_id", "function_name", "arguments"}
            assert isinstance(call["arguments"], dict)
        for result in (step.get("observation") or {}).get("results", []):
            assert set(result) <= {"source_call_id", "content", "subagent_trajectory_ref"}
            if "source_call_id" in result:  # the validator checks ids against the step's calls
                assert result["source_call_id"] in ids
    agents = [s for s in steps if s["source"] == "agent"]
    assert len(agents) == 7 and agents[0]["metrics"] == {
        "prompt_tokens": 1520, "completion_tokens": 96, "cached_tokens": 1024,
        "extra": {"reasoning_tokens": 40}}
    compaction = next(s for s in steps if s["source"] == "system" and "compaction" in s["message"])
    assert compaction["observation"]["results"][0]["content"].startswith("## Goal")
    bad_args = next(s for s in agents if "invalid_arguments" in s.get("extra", {}))
    assert bad_args["tool_calls"][0]["arguments"] == {}
    final = doc["final_metrics"]
    assert final["total_prompt_tokens"] == 109_500 and final["total_steps"] == len(steps)
    assert "total_cost_usd" not in final  # no price for openai:gpt-test: no cost made up
    outcome = {k: doc["extra"][k] for k in ("completion_status", "partial", "reward", "resolved")}
    assert outcome == {"completion_status": "completed", "partial": False, "reward": None,
                       "resolved": None}


def test_atif_costs_each_call_at_its_price() -> None:
    doc = to_atif(fixture_trajectory(), prices={"openai:gpt-test": Price(1.0, 2.0, 0.5)})
    validate(doc)
    calls = [s["metrics"]["cost_usd"] for s in doc["steps"] if "metrics" in s]
    # The first call: 496 fresh prompt tokens at $1, 1,024 cached at $0.5, 96 out at $2 per M.
    assert len(calls) == 7 and calls[0] == pytest.approx((496 * 1.0 + 1024 * 0.5 + 96 * 2.0) / 1e6)
    assert doc["final_metrics"]["total_cost_usd"] == pytest.approx(sum(calls), abs=1e-6)
    line = json.loads(export([fixture_trajectory()], "openai", CATALOG,
                             {"openai:*": Price(1.0, 2.0, 0.5)}))
    assert line["cost_usd"] == doc["final_metrics"]["total_cost_usd"]


def test_completion_status_rules() -> None:
    def status(*messages):
        return build(list(messages), None, session_id="s").status

    user = {"role": "user", "content": "go"}
    assert status(user) == "partial"
    assert status(user, {"role": "assistant", "content": "done"}) == "completed"
    assert status(user, {"role": "assistant", "content": "half", "interrupted": True}) == "partial"
    calling = {"role": "assistant", "content": "", "tool_calls": [{"id": "1", "name": "x", "arguments": "{}"}]}
    assert status(user, calling, {"role": "tool", "tool_call_id": "1", "name": "x", "content": "{}"}) == "partial"


def test_load_from_store_has_metadata_times_and_events(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    store.create_session("s1", "/proj", model="openai:m", mode="default")
    store.update_session("s1", title="A title")
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    for row in rows:
        store.append("s1", row)
    traj = load_trajectory(store, "s1")
    assert (traj.model, traj.cwd, traj.title, traj.mode) == ("openai:m", "/proj", "A title", "default")
    assert len(traj.messages) == len(rows) - 1 and len(traj.compactions) == 1
    assert all(isinstance(t, float) for t in traj.times)
    assert traj.compactions[0]["time"] >= traj.times[0]
    # write_transcript still writes the whole transcript, event rows included, and reads back.
    path = write_transcript(store, "s1", tmp_path / "out")
    assert [json.loads(line) for line in path.read_text().splitlines()] == rows
    assert load_trajectory_file(path).messages == traj.messages
    with pytest.raises(TrajectoryNotFound):
        load_trajectory(store, "nope")


@pytest.mark.parametrize(("change", "says"), [
    (lambda d: d["steps"][1].update(metrics={"prompt_tokens": 1}), "steps.1: Value error"),
    (lambda d: d["steps"][2].update(step_id=9), "not sequential"),
    (lambda d: d["steps"][2]["observation"]["results"][0].update(source_call_id="nope"),
     "does not match any tool_call"),
    (lambda d: d.update(final_metrics={"total_cost": 1.0}), "final_metrics.total_cost"),
])
def test_validation_names_what_atif_rejects(change, says: str) -> None:
    doc = to_atif(fixture_trajectory(), agent_version="1.0")
    validate(doc)
    change(doc)
    with pytest.raises(ValueError, match="not valid ATIF-v1.8") as caught:
        validate(doc)
    assert says in str(caught.value) and "\n" not in str(caught.value)
