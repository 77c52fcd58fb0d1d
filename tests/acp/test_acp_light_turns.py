"""A short session never builds the tokenizer: its build holds the GIL for 60-90 ms in one
step, stalling every other request (issue 9), and costs ~14 MB. Only a context that nears
the compaction threshold is counted exactly (tests/agent/context/test_token_bound.py)."""

from __future__ import annotations

from pathlib import Path

from tests.acp_harness import Editor


def _loaded(pid: int, library: str) -> bool:
    return library in Path(f"/proc/{pid}/maps").read_text()


def test_short_prompts_do_not_load_tiktoken(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"text": "Hello."}, {"text": "Again."}])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        assert ed.prompt(sid, "Say hello")["stopReason"] == "end_turn"
        assert ed.prompt(sid, "x" * 50_000)["stopReason"] == "end_turn"
        assert ed.updates(sid, "usage_update")[-1]["used"] > 0
        assert ed.proc is not None and not _loaded(ed.proc.pid, "_tiktoken")
