"""The HTML pages: well-formed, self-contained, collapsible calls, SVG charts for batches.

Checked by parsing, not by a browser (the pages were looked at in headless Chromium while
being built; tests must not need one).
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

from talaria.agent.trajectories.export import ToolCatalog, export
from talaria.agent.trajectories.load import load_trajectory_file
from talaria.agent.trajectories.report import is_batch, load_batch, render_batch
from talaria.agent.trajectories.view import TEXT_LIMIT, render_trajectory
from tests import TESTS

FIXTURE = TESTS / "golden" / "transcript.jsonl"
VOID = {"meta", "img", "br", "hr", "input", "link", "rect", "line", "circle", "path"}


class Structure(HTMLParser):
    """Counts tags and checks that every opened element is closed in order."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.counts: dict[str, int] = {}
        self.errors: list[str] = []
        self.srcs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.counts[tag] = self.counts.get(tag, 0) + 1
        self.srcs += [v or "" for k, v in attrs if k in ("src", "href")]
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.counts[tag] = self.counts.get(tag, 0) + 1

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()


def parse(html: str) -> Structure:
    assert html.startswith("<!DOCTYPE html>")
    doc = Structure()
    doc.feed(html)
    doc.close()
    assert not doc.errors, doc.errors[:5]
    assert not doc.stack, f"unclosed: {doc.stack}"
    assert "script" not in doc.counts, "no JavaScript"
    assert all(s.startswith("data:") for s in doc.srcs), "self-contained: no fetched resources"
    return doc


def test_trajectory_page_structure() -> None:
    traj = load_trajectory_file(FIXTURE)
    html = render_trajectory(traj)
    doc = parse(html)
    # 7 tool calls + 4 thinking blocks + system prompt + compaction summary
    assert doc.counts["details"] == 7 + 4 + 1 + 1
    assert doc.counts["svg"] == 3  # input tokens, output tokens per call; tool calls
    assert doc.counts["img"] == 2  # the user's screenshot and the tool's image
    assert html.count('class="msg agent"') == traj.api_calls
    assert "Context compacted (auto, stage 2): 102,400 → 20,480 tokens" in html
    assert "1,520 in (1,024 cached)" in html  # tokens per turn
    assert "sk-proj-Zx81" not in html and "[REDACTED]" in html
    # A failed call starts open; a completed one closed.
    assert '<details class="tool failed" open' in html


def test_long_outputs_are_capped_and_markup_is_escaped() -> None:
    rows = [{"role": "user", "content": "<script>alert(1)</script>"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c", "name": "terminal", "arguments": '{"command": "yes"}'}]},
            {"role": "tool", "tool_call_id": "c", "name": "terminal", "status": "completed",
             "content": json.dumps({"output": "y\n" * TEXT_LIMIT})}]
    from talaria.agent.trajectories.model import build

    html = render_trajectory(build(rows, None, session_id="s"))
    parse(html)
    assert "&lt;script&gt;" in html
    assert f"({TEXT_LIMIT:,} more characters)" in html


def _talaria_record(task_id: str, status: str) -> dict:
    messages = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    return {"task_id": task_id, "prompt": "Fix the header", "status": status, "reason": "end_turn",
            "error": None, "messages": messages, "model": "openai:gpt-test", "turns": 7,
            "tokens": {"input": 109500, "output": 324}, "duration_s": 12.0, "model_s": 5.7,
            "tool_stats": {"read_file": {"calls": 3, "failed": 1}, "terminal": {"calls": 3, "failed": 1}}}


def test_batch_dir_page_has_svg_charts(tmp_path: Path) -> None:
    run = tmp_path / "data" / "r1"
    run.mkdir(parents=True)
    traj = load_trajectory_file(FIXTURE)
    line = json.loads(export([traj], "sharegpt", ToolCatalog.builtin()))
    hermes = dict(line, metadata={"model": "m", "timestamp": "2026-01-15T10:30:00"})  # no usage
    lines = [line, hermes, dict(line, prompt_index=2, completed=False, partial=True)]
    (run / "trajectories.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (run / "statistics.json").write_text(json.dumps({
        "run_name": "r1", "model": "m", "duration_seconds": 61.5,
        "tool_statistics": {"read_file": {"count": 9, "success": 6, "failure": 3}},
        "reasoning_statistics": {"total_assistant_turns": 21, "turns_with_reasoning": 15}}))
    assert is_batch(run) and is_batch(run / "trajectories.jsonl") and not is_batch(FIXTURE)
    html = render_batch(*load_batch(run))
    doc = parse(html)
    # tool usage, success rate, turns per task, tokens per task
    assert doc.counts["svg"] == 4 and doc.counts["rect"] > 10
    assert "Batch: r1" in html and "estimated from the text" in html
    assert "67% of 9" in html  # success rate from statistics.json
    assert html.count("<tr>") == 1 + 3 and doc.counts["details"] >= 3


def test_batch_page_reads_talaria_batch_records(tmp_path: Path) -> None:
    path = tmp_path / "trajectories.jsonl"
    path.write_text("".join(json.dumps(_talaria_record(f"task-{i}", s)) + "\n"
                            for i, s in enumerate(["completed", "failed"])))
    assert is_batch(path)
    html = render_batch(*load_batch(path))
    doc = parse(html)
    assert doc.counts["svg"] == 4 and "task-1" in html and "67% of 6" in html
    assert "sk-proj-Zx81" not in html
    # The conversation of each task renders as turns with collapsible tool calls.
    assert html.count('class="msg agent"') == 2 * 7
