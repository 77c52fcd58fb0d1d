"""Subagents in trajectories: their transcripts are filed under the `delegate_task` result in
the store, and every export keeps them (ShareGPT: the tool result plus a `subagents` field)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from talaria.agent.loop import run_turn
from talaria.agent.store import Store
from talaria.agent.trajectories.export import ToolCatalog, export
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
    step = next(s for s in atif["steps"] if (s.get("extra") or {}).get("subagents"))
    nested = step["extra"]["subagents"][1]["trajectory"]
    assert nested["schema_version"] == atif["schema_version"] and nested["final_metrics"]["extra"][
        "api_calls"] == 3
    store.close()
