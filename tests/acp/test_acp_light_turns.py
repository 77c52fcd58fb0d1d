"""A short session never builds the tokenizer: its build holds the GIL for 60-90 ms in one
step, stalling every other request (issue 9), and costs ~14 MB. Only a context that nears
the compaction threshold is counted exactly (tests/agent/context/test_token_bound.py)."""

from __future__ import annotations

from pathlib import Path

from tests import processes
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


def _children(pid: int) -> list[str]:
    found = []
    for entry in processes():
        try:
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[1] == str(pid):
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:  # gone meanwhile
            continue
    return found


def test_exact_counts_are_made_in_a_child_process(tmp_path: Path, fake_llm) -> None:
    # Window 10,000 tokens: 9,000 words are over the compaction threshold as counted exactly.
    fake_llm.script([{"text": "## Goal\nread"}, {"text": "Read it."}, {"text": "ok"}])
    with Editor(tmp_path, fake_llm, env={"TALARIA_CONTEXT_WINDOW": "10000"}) as ed:
        ed.initialize()
        sid = ed.new_session()
        ed.prompt(sid, "first task " * 300)
        assert ed.prompt(sid, "word " * 9_000)["stopReason"] == "end_turn"
        assert ed.proc is not None
        assert any("token_child" in command for command in _children(ed.proc.pid))
        assert not _loaded(ed.proc.pid, "_tiktoken")
