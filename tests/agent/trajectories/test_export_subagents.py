"""Subagents in trajectories: their transcripts are filed under the `delegate_task` result in
the store, and every export keeps them (ShareGPT: the tool result plus a `subagents` field)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from talaria.agent.loop import run_turn
from talaria.agent.store import Store
from talaria.agent.trajectories.export import ToolCatalog, export
from talaria.agent.trajectories.export.atif import validate
from talaria.agent.trajectories.load import load_trajectory
from tests.agent.test_subagents import delegate, router, writes
from tests.helpers import make_session


def test_every_export_keeps_the_subagents_nested_under_the_call(tmp_path: Path, fake_llm) -> None:
    store = Store(tmp_path / "sessions.db")
    session = make_session(fake_llm, tmp_path, store=store)
    fake_llm.respond = router({"a": writes("a", 1), "b": writes("b", 2)})
    fake_llm.script([delegate("a", "b"), {"text": "Both done."}])
    assert anyio.run(run_turn, session, "split") == "end_turn"
    traj = load_trajectory(store, session.id)
    call_id = next(m["tool_call_id"] for m in traj.messages if m.get("name") == "delegate_task")
    catalog = ToolCatalog.builtin()

    line = json.loads(export([traj], "sharegpt", catalog))
    tool_turn = next(t["value"] for t in line["conversations"] if t["from"] == "tool")
    assert "Summary of a" in tool_turn and "conversations" not in tool_turn  # the result only
    first, second = line["subagents"]
    assert (first["tool_call_id"], first["task"], first["status"]) == (call_id, 1, "completed")
    assert [t["from"] for t in second["conversations"]] == ["system", "human", "gpt", "tool", "gpt",
                                                            "tool", "gpt"]
    assert second["subagents"] == []

    openai = json.loads(export([traj], "openai", catalog))
    assert [r["goal"] for r in openai["subagents"]] == ["goal:a do it", "goal:b do it"]
    assert openai["subagents"][0]["messages"][-1] == {"role": "assistant",
                                                      "content": "Summary of a: wrote 1 files."}

    atif = json.loads(export([traj], "atif", catalog))
    validate(atif)
    # ATIF v1.7+: the delegate_task result refers to each subagent by trajectory_id; their
    # documents are embedded whole in the root's subagent_trajectories.
    (result,) = [r for s in atif["steps"] for r in (s.get("observation") or {}).get("results", [])
                 if r.get("subagent_trajectory_ref")]
    refs = result["subagent_trajectory_ref"]
    assert result["source_call_id"] == call_id
    assert [(r["extra"]["task"], r["extra"]["goal"], r["extra"]["status"]) for r in refs] == [
        (1, "goal:a do it", "completed"), (2, "goal:b do it", "completed")]
    embedded = {d["trajectory_id"]: d for d in atif["subagent_trajectories"]}
    assert list(embedded) == [r["trajectory_id"] for r in refs]
    nested = embedded[refs[1]["trajectory_id"]]
    assert nested["schema_version"] == atif["schema_version"] == "ATIF-v1.8"
    assert nested["final_metrics"]["extra"]["api_calls"] == 3
    assert nested["session_id"] == refs[1]["session_id"]
    assert (nested["extra"]["status"], nested["extra"]["partial"]) == ("completed", False)
    assert nested["extra"]["parent_tool_call_id"] == call_id
    store.close()


def test_partial_subagents_and_a_cut_turn_are_marked(tmp_path: Path, fake_llm) -> None:
    """A subagent stopped by its budget and a parent whose last call asked for tools (its turn
    cut off) are valid ATIF documents marked partial, with the subagent's own status."""
    store = Store(tmp_path / "sessions.db")
    session = make_session(fake_llm, tmp_path, store=store, subagent_max_turns=1, max_turns=2)
    fake_llm.respond = router({"a": writes("a", 3)})
    fake_llm.script([delegate("a"), {"tool_calls": [
        {"name": "read_file", "arguments": {"path": "a0.txt"}}]}])
    # Out of model calls right after the read: the turn ends with a call unanswered by a model.
    assert anyio.run(run_turn, session, "split") == "max_turn_requests"
    traj = load_trajectory(store, session.id)
    atif = json.loads(export([traj], "atif", ToolCatalog.builtin()))
    validate(atif)
    assert (atif["extra"]["completion_status"], atif["extra"]["partial"]) == ("partial", True)
    (child,) = atif["subagent_trajectories"]
    assert (child["extra"]["status"], child["extra"]["partial"]) == ("budget_exceeded", True)
    assert child["final_metrics"]["extra"]["api_calls"] == 1
    store.close()
