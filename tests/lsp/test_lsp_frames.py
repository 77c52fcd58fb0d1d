"""The frame reader `talaria lsp` reads all of stdin through (`frames.FrameReader`), on real
files and a real server: every bound is hit, every hostile frame of `hostile.py` is answered
or skipped and the next frame read, generated garbage never hides the frame after it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from talaria.acp_server.lsp.frames import (
    MAX_DEPTH,
    MAX_FRAME_BYTES,
    MAX_HEADER_LINE_BYTES,
    MAX_HEADERS,
    MAX_SKIP_BYTES,
    PEEK_BYTES,
    FrameReader,
    FramingLost,
    Output,
    top_level_keys,
)
from tests.lsp import hostile
from tests.lsp.hostile import frame, parse, request
from tests.lsp.lsp_editor import TIMEOUT
from tests.lsp.test_lsp_stdio import INITIALIZE, RawClient, spawn

NEXT = request(42, "next", {})


def read(tmp: Path, data: bytes, **bounds: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(messages read, replies written) for `data` on a real file."""
    (tmp / "in").write_bytes(data)
    messages = []
    with (tmp / "in").open("rb") as stdin, (tmp / "out").open("wb") as stdout:
        reader = FrameReader(stdin, Output(stdout), **bounds)
        while (message := reader.message()) is not None:
            messages.append(message)
            while reader.readline() not in (b"\r\n", b""):  # as pygls reads: lines, then the body
                pass
            reader.read(len(json.dumps(message)) * 4)
    return messages, parse((tmp / "out").read_bytes())


def codes(replies: list[dict[str, Any]]) -> list[tuple[Any, int]]:
    return [(r["id"], r["error"]["code"]) for r in replies if "error" in r]


# -- each bound -------------------------------------------------------------------------------

@pytest.mark.parametrize("size, ok", [(MAX_HEADER_LINE_BYTES, True), (MAX_HEADER_LINE_BYTES + 1, False)])
def test_a_header_line_over_the_bound_is_answered_and_read_past(tmp_path: Path, size: int, ok: bool) -> None:
    line = b"X: " + b"a" * (size - 3) + b"\r\n"
    messages, replies = read(tmp_path, line + frame(NEXT))
    assert messages == [NEXT]
    assert codes(replies) == ([] if ok else [(None, -32700)])
    if not ok:
        assert f"a header line over {MAX_HEADER_LINE_BYTES} bytes" in replies[0]["error"]["message"]


@pytest.mark.parametrize("count, ok", [(MAX_HEADERS, True), (MAX_HEADERS + 1, False)])
def test_more_header_lines_than_the_bound_are_answered(tmp_path: Path, count: int, ok: bool) -> None:
    data = b"X: y\r\n" * (count - 1) + frame(NEXT)
    messages, replies = read(tmp_path, data)
    assert messages == [NEXT]  # read again from its own Content-Length
    assert codes(replies) == ([] if ok else [(None, -32700)])


@pytest.mark.parametrize("levels, ok", [(MAX_DEPTH - 2, True), (MAX_DEPTH - 1, False), (5000, False)])
def test_a_body_nested_deeper_than_the_bound_gets_its_id_back(tmp_path: Path, levels: int, ok: bool) -> None:
    deep = b'{"jsonrpc":"2.0","id":7,"method":"x","params":{"a":' + b"[" * levels + b"]" * levels + b"}}"
    messages, replies = read(tmp_path, frame(deep) + frame(NEXT))
    assert messages[-1] == NEXT and len(messages) == (2 if ok else 1)
    assert codes(replies) == ([] if ok else [(7, -32600)])


def test_a_body_over_the_bound_is_skipped_exactly(tmp_path: Path) -> None:
    limit = 1000
    over = json.dumps(request(7, "x", {"text": "y" * limit})).encode()
    note = json.dumps({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"t": "y" * limit}})
    empty = len(json.dumps(request(8, "x", {"t": ""})))
    fits = json.dumps(request(8, "x", {"t": "y" * (limit - empty)})).encode()
    assert len(fits) == limit < len(over)
    messages, replies = read(tmp_path, frame(over) + frame(note.encode()) + frame(fits) + frame(NEXT),
                             max_frame=limit)
    assert [m["id"] for m in messages] == [8, 42]
    assert codes(replies) == [(7, -32600)]  # the request is answered, the notification is not:
    assert replies[1]["method"] == "window/showMessage" and "textDocument/didOpen" in str(replies[1])


def test_an_id_past_the_peek_is_not_guessed(tmp_path: Path) -> None:
    body = b'{"jsonrpc":"2.0","method":"x","params":{"a":"' + b"y" * PEEK_BYTES + b'"},"id":7}'
    messages, replies = read(tmp_path, frame(body) + frame(NEXT), max_frame=PEEK_BYTES)
    assert messages == [NEXT]
    assert codes(replies) == [] and replies[0]["method"] == "window/showMessage"


def test_a_length_over_the_skip_bound_gives_up(tmp_path: Path) -> None:
    read(tmp_path, b"Content-Length: 1000\r\n\r\n{}", max_frame=10, max_skip=1000)  # skipped
    with pytest.raises(FramingLost, match="declares 1001 bytes"):
        read(tmp_path, b"Content-Length: 1001\r\n\r\n{}", max_frame=10, max_skip=1000)


def test_the_real_bounds_are_what_the_docs_say() -> None:
    assert (MAX_FRAME_BYTES, MAX_SKIP_BYTES) == (256 * 1024 * 1024, 1024 * 1024 * 1024)
    docs = (Path(__file__).parents[2] / "docs/architecture.md").read_text()
    assert "256 MiB" in docs and "1 GiB" in docs


def test_a_body_over_the_real_bound_is_answered_by_a_running_server(tmp_path: Path) -> None:
    proc = spawn(tmp_path, None)
    client = RawClient(proc)
    client.send(INITIALIZE)
    client.until_response(1)
    head = b'{"jsonrpc":"2.0","id":7,"method":"x","params":{"a":"'
    body = head + b"y" * (MAX_FRAME_BYTES + 1 - len(head) - 3) + b'"}}'
    assert proc.stdin is not None
    proc.stdin.write(frame(body))
    client.send(request(8, "shutdown"))
    assert client.until_response(7)["error"]["code"] == -32600
    assert client.until_response(8)["result"] is None
    proc.stdin.close()
    proc.wait(timeout=TIMEOUT)


# -- every hostile frame, and generated garbage --------------------------------------------------

FRAME_CASES = hostile.frame_cases(big=False)


@pytest.mark.parametrize("case", FRAME_CASES, ids=[c.name for c in FRAME_CASES])
def test_each_hostile_frame_is_answered_or_skipped_and_the_next_one_read(
        tmp_path: Path, case: hostile.Case) -> None:
    if case.exits:
        with pytest.raises(FramingLost):
            read(tmp_path, case.data + frame(NEXT))
        return
    messages, replies = read(tmp_path, case.data + frame(NEXT))
    assert messages[-1] == NEXT
    assert all(r.get("id") in (None, 5) for r in replies if "method" not in r), replies
    assert "traceback" not in json.dumps(replies).lower()


@settings(max_examples=300, deadline=None)
@given(garbage=st.binary(max_size=400).map(lambda b: b.lower().replace(b"length", b"")))
def test_garbage_never_hides_the_frame_after_it(garbage: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        messages, replies = read(Path(tmp), garbage + frame(NEXT))
    assert messages[-1] == NEXT
    assert len(replies) <= 2 and all(r["id"] is None and r["error"]["code"] in (-32700, -32600)
                                     for r in replies)


def test_the_first_bytes_of_a_body_say_whether_it_is_a_request() -> None:
    assert top_level_keys(b'{"jsonrpc": "2.0", "id": 3, "method": "x", "params": {"a": "yyy') == \
        {"jsonrpc": "2.0", "id": 3, "method": "x"}
    assert top_level_keys(b'[{"id": 3}]') == {}
    assert top_level_keys(b'{"params": [1, 2') == {}


def test_a_length_no_stream_has_exits_with_one_line(tmp_path: Path) -> None:
    proc = spawn(tmp_path, None)
    out, err = proc.communicate(b"Content-Length: 100000000000\r\n\r\n{}", timeout=TIMEOUT)
    assert proc.returncode == 1 and out == b""
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and "declares 100000000000 bytes" in lines[0], err


@pytest.mark.parametrize("length, status", [(b"2147483648", 1), (b"300000000", 0)])
def test_printf_of_a_huge_length_is_not_a_memory_error(tmp_path: Path, length: bytes, status: int) -> None:
    result = subprocess.run(hostile.SERVER, input=b"Content-Length: %s\r\n\r\n{}" % length,
                            capture_output=True, timeout=TIMEOUT, cwd=tmp_path,
                            env=hostile.server_env(tmp_path / "home", None))
    assert result.returncode == status  # over the skip bound: given up; under it: EOF while skipping
    assert b"Error" not in result.stderr and b"Traceback" not in result.stderr, result.stderr
