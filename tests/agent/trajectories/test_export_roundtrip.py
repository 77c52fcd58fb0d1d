"""A real session (the loop, real tools, SQLite, the fake LLM over HTTP) exported as ShareGPT
and parsed back keeps every turn; OpenAI and ATIF exports of it hold every call and result."""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from talaria.agent.loop import run_turn
from talaria.agent.store import Store
from talaria.agent.trajectories.export import ToolCatalog, export
from talaria.agent.trajectories.export.sharegpt import parse_sharegpt
from talaria.agent.trajectories.load import load_trajectory
from tests.helpers import make_session


def record_session(fake_llm, tmp_path: Path) -> tuple[Store, str]:
    store = Store(tmp_path / "s.db")
    session = make_session(fake_llm, tmp_path, store=store)
    (session.cwd / "notes.txt").write_text("alpha\nbeta\n")
    fake_llm.script([
        {"reasoning": "Read both files at once.", "text": "Reading.", "tool_calls": [
            {"name": "read_file", "arguments": {"path": "notes.txt"}},
            {"name": "read_file", "arguments": {"path": "missing.txt"}}]},
        {"text": "Writing.", "tool_calls": [
            {"name": "write_file", "arguments": {"path": "out/summary.txt", "content": "2 lines\n"}}]},
        {"reasoning": "Both done.", "text": "Done: 2 lines."},
        {"tool_calls": [{"name": "terminal", "arguments": {"command": "cat out/summary.txt"}}]},
        {"text": "It says: 2 lines."},
    ])
    assert anyio.run(run_turn, session, "Summarise notes.txt") == "end_turn"
    assert anyio.run(run_turn, session, "Show me the summary") == "end_turn"
    return store, session.id


def test_sharegpt_round_trip_keeps_every_turn(fake_llm, tmp_path: Path) -> None:
    store, session_id = record_session(fake_llm, tmp_path)
    traj = load_trajectory(store, session_id)
    assert traj.status == "completed" and traj.api_calls == 5
    assert traj.tool_stats["read_file"] == {"count": 2, "success": 1, "failure": 1}
    assert all(t.input_tokens > 0 and t.duration_ms is not None for t in traj.turns)

    line = export([traj], "sharegpt", ToolCatalog.builtin())
    assert line.count("\n") == 1
    parsed = parse_sharegpt(line)
    original = [m for m in store.messages(session_id) if m["role"] != "system"]
    assert parsed[0]["role"] == "system" and "<tools>" in parsed[0]["content"]
    assert [m["role"] for m in parsed[1:]] == [m["role"] for m in original]
    for got, want in zip(parsed[1:], original, strict=True):
        if want["role"] == "user":
            assert got["content"] == want["content"]
        elif want["role"] == "assistant":
            assert got["content"] == want["content"].strip()
            assert got.get("reasoning") == want.get("reasoning")
            assert [(c["id"], c["name"], json.loads(c["arguments"])) for c in got.get("tool_calls", [])] == \
                [(c["id"], c["name"], json.loads(c["arguments"])) for c in want.get("tool_calls", [])]
        else:
            assert (got["tool_call_id"], got["name"]) == (want["tool_call_id"], want["name"])
            assert json.loads(got["content"]) == json.loads(want["content"])


def test_openai_and_atif_exports_of_a_real_session(fake_llm, tmp_path: Path) -> None:
    store, session_id = record_session(fake_llm, tmp_path)
    traj = load_trajectory(store, session_id)
    openai_line = json.loads(export([traj], "openai", ToolCatalog.builtin()))
    roles = [m["role"] for m in openai_line["messages"]]
    assert roles == [m["role"] for m in store.messages(session_id)]
    assert {t["function"]["name"] for t in openai_line["tools"]} >= {"read_file", "terminal"}

    atif = json.loads(export([traj], "atif", ToolCatalog.builtin()))
    agent_steps = [s for s in atif["steps"] if s["source"] == "agent"]
    assert len(agent_steps) == 5 and all("metrics" in s and "timestamp" in s for s in agent_steps)
    results = [r for s in agent_steps for r in s.get("observation", {}).get("results", [])]
    assert len(results) == 4 and all(r["source_call_id"] for r in results)
    assert atif["final_metrics"]["total_prompt_tokens"] == traj.totals()["input_tokens"]
