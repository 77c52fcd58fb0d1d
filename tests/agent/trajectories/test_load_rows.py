"""Reading every trajectory of a file: transcripts, ShareGPT files, and the lines that fail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from talaria.agent.trajectories.export import ExportError, ToolCatalog, export
from talaria.agent.trajectories.load import ROWS_NAMED, UnreadableRows, load_trajectory_rows
from talaria.agent.trajectories.model import TrajectoryNotFound, build
from tests import TESTS

FIXTURE = TESTS / "golden" / "transcript.jsonl"
HERMES = {"conversations": [{"from": "system", "value": "tools"},
                            {"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}],
          "completed": True}


def test_a_transcript_is_one_trajectory() -> None:
    [traj] = load_trajectory_rows(FIXTURE)
    assert traj.session_id == "transcript" and traj.extra["origin"] == str(FIXTURE)


def test_sharegpt_lines_keep_their_index_or_get_their_position(tmp_path: Path) -> None:
    path = tmp_path / "hermes.jsonl"
    lines = [{**HERMES, "prompt_index": 42}, HERMES, {**HERMES, "metadata": {
        "session_id": "s3", "usage": {"input_tokens": 7, "output_tokens": 2}}}]
    path.write_text("\n".join(json.dumps(x) for x in lines[:2]) + "\n\n" + json.dumps(lines[2]) + "\n")
    rows = load_trajectory_rows(path)
    assert [t.extra["prompt_index"] for t in rows] == [42, 1, 2]
    assert [t.extra["origin"] for t in rows] == [f"{path}:1", f"{path}:2", f"{path}:4"]
    assert [t.session_id for t in rows] == ["hermes-0", "hermes-1", "s3"]
    assert rows[2].totals()["input_tokens"] == 7, "a line's recorded usage when turns have none"
    out = export(rows, "sharegpt", ToolCatalog())
    assert [json.loads(line)["prompt_index"] for line in out.splitlines()] == [42, 1, 2]


def test_unreadable_lines_are_named_not_dropped(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    bad = [json.dumps({**HERMES, "conversations": [{"from": "alien", "value": "?"}]}), "{torn",
           json.dumps({**HERMES, "metadata": "not an object"})]
    path.write_text("\n".join([json.dumps(HERMES), *bad, json.dumps(HERMES)]) + "\n")
    with pytest.raises(UnreadableRows) as caught:
        load_trajectory_rows(path)
    assert [n for n, _ in caught.value.rows] == [2, 3, 4] and caught.value.total == 5
    assert "3 of 5 line(s)" in str(caught.value) and "alien" in str(caught.value)


def test_errors_name_at_most_a_bounded_number_of_lines(tmp_path: Path) -> None:
    path = tmp_path / "many.jsonl"
    path.write_text(json.dumps(HERMES) + "\n" + "not json\n" * (ROWS_NAMED + 5))
    with pytest.raises(UnreadableRows) as caught:
        load_trajectory_rows(path)
    message = str(caught.value)
    assert message.count("line ") == ROWS_NAMED and "and 5 more" in message
    assert len(caught.value.rows) == ROWS_NAMED + 5


def test_a_transcript_with_a_torn_line_names_it(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    lines = FIXTURE.read_text().splitlines()
    path.write_text("\n".join([*lines[:3], lines[3][:20], *lines[4:]]) + "\n")
    with pytest.raises(UnreadableRows, match="line 4: not JSON"):
        load_trajectory_rows(path)


def test_a_transcript_message_that_cannot_be_read_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"role": "assistant", "tool_calls": [{"arguments": "{}"}]}) + "\n")
    with pytest.raises(TrajectoryNotFound, match="KeyError"):
        load_trajectory_rows(path)


@pytest.mark.parametrize("text", ["", "\n\n", "not json\n", '{"messages": [], "tools": []}\n'])
def test_files_of_neither_kind_are_a_clear_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(text)
    with pytest.raises(TrajectoryNotFound, match="neither a transcript"):
        load_trajectory_rows(path)


def test_export_names_the_trajectories_it_cannot_convert() -> None:
    good = build([{"role": "user", "content": "hi"}], None, session_id="good")
    broken = build([{"role": "user", "content": ["a bare string, not a content part"]}],
                   None, session_id="broken", extra={"origin": "run.jsonl:7"})
    for fmt in ("sharegpt", "openai", "atif"):
        with pytest.raises(ExportError, match=r"1 of 2 .*run\.jsonl:7: AttributeError"):
            export([good, broken], fmt, ToolCatalog())
