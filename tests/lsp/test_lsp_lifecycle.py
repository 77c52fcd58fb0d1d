"""LSP's lifecycle in `talaria lsp` (-32002 before `initialize`, -32600 after `shutdown`,
`exit`'s status), errors without tracebacks, and every `talaria.*` command's arguments checked
at once: -32602 naming the argument, never a FIFO or a device opened as a document."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types
from pygls.exceptions import JsonRpcInternalError

from talaria.acp_server.lsp import prompts
from talaria.acp_server.lsp.protocol import (
    MAX_ERROR_CHARS,
    MAX_METHOD_CHARS,
    MAX_REASON_CHARS,
    reason,
)
from talaria.acp_server.lsp.server import build_server
from talaria.agent.config import Config
from tests.fakellm import FakeLLM
from tests.lsp import hostile
from tests.lsp.hostile import frame, request
from tests.lsp.lsp_editor import TIMEOUT
from tests.lsp.test_lsp_stdio import INITIALIZE, RawClient, spawn

REQUESTS = sorted(m for m, kinds in types.METHOD_TO_TYPES.items()
                  if kinds[1] is not None and m != types.INITIALIZE)
"""Every LSP request method but initialize (shutdown included)."""
NOTIFICATIONS = sorted(m for m, kinds in types.METHOD_TO_TYPES.items()
                       if kinds[1] is None and m != types.EXIT)


def test_every_request_before_initialize_gets_server_not_initialized(tmp_path: Path) -> None:
    proc = spawn(tmp_path, None)
    client = RawClient(proc)
    for method in NOTIFICATIONS:  # dropped, never answered: LSP's rule before initialize
        client.send({"jsonrpc": "2.0", "method": method, "params": {}})
    ids = list(range(100, 100 + len(REQUESTS)))
    for msg_id, method in zip(ids, REQUESTS, strict=True):
        client.send(request(msg_id, method, {}))
    client.send(request(99, "workspace/executeCommand", {"command": "talaria.ask", "arguments": ["hi"]}))
    client.until_response(99)  # the last: the others were answered before it
    replies = {m["id"]: m for m in client.complete() if "method" not in m}
    assert sorted(replies) == sorted([*ids, 99])
    long = "x/" + "y" * 5000
    client.send(request(98, long, {}))
    client.until_response(98)
    client.send(INITIALIZE)  # and then the server starts as usual
    assert "capabilities" in client.until_response(1)["result"]
    client.send(request(97, long, {}))  # pygls' MethodNotFound quotes the method whole
    not_found = client.until_response(97)["error"]
    assert not_found["code"] == -32601 and len(not_found["message"]) <= MAX_ERROR_CHARS
    too_long = {m["id"]: m for m in client.complete() if "method" not in m}.pop(98)["error"]
    assert too_long["code"] == -32002 and long[:MAX_METHOD_CHARS] + "..." in too_long["message"]
    assert long[:MAX_METHOD_CHARS + 1] not in too_long["message"]
    for reply in replies.values():
        assert reply["error"]["code"] == -32002, reply
        assert "send `initialize` first" in reply["error"]["message"]
        assert "data" not in reply["error"]
    answered = [m.get("id") for m in client.complete() if "method" not in m]
    assert sorted(answered) == sorted([*ids, 99, 98, 97, 1])  # no notification was answered
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=TIMEOUT)


@pytest.mark.parametrize("shutdown, status", [(False, 1), (True, 0)])
def test_exit_ends_the_server_with_lsps_status(tmp_path: Path, shutdown: bool, status: int) -> None:
    proc = spawn(tmp_path, None)
    client = RawClient(proc)
    client.send(INITIALIZE)
    client.until_response(1)
    if shutdown:
        client.send(request(2, "shutdown"))
        assert client.until_response(2)["result"] is None
    client.send({"jsonrpc": "2.0", "method": "exit"})
    assert proc.wait(timeout=TIMEOUT) == status


def test_exit_before_initialize_ends_the_server(tmp_path: Path) -> None:
    proc = spawn(tmp_path, None)
    _, err = proc.communicate(frame({"jsonrpc": "2.0", "method": "exit"}), timeout=TIMEOUT)
    assert proc.returncode == 1 and b"Traceback" not in err


def test_after_shutdown_requests_are_refused_and_a_second_initialize_too(tmp_path: Path) -> None:
    proc = spawn(tmp_path, None)
    client = RawClient(proc)
    client.send(INITIALIZE)
    client.until_response(1)
    client.send({**INITIALIZE, "id": 2})
    assert client.until_response(2)["error"]["code"] == -32600  # initialize is sent once
    client.send(request(3, "shutdown"))
    client.until_response(3)
    client.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {}})
    client.send(request(4, "textDocument/hover", {}))
    client.send(request(5, "shutdown"))
    for msg_id in (4, 5):
        error = client.until_response(msg_id)["error"]
        assert error["code"] == -32600 and "shutting down" in error["message"]
    client.send({"jsonrpc": "2.0", "method": "exit"})
    assert proc.wait(timeout=TIMEOUT) == 0


@pytest.mark.parametrize("params", [
    {"processId": "not a number", "rootUri": None, "capabilities": {}},
    {"processId": None, "rootUri": None, "capabilities": {"window": {"showMessage": 5}}},
])
def test_an_initialize_answered_early_that_pygls_cannot_type_still_sets_up(
        tmp_path: Path, params: dict[str, Any]) -> None:
    proc = spawn(tmp_path, None)
    client = RawClient(proc)
    client.send(request(1, "initialize", params))
    assert "capabilities" in client.until_response(1)["result"]  # main.py reads capabilities only
    client.send(request(2, "workspace/executeCommand", {"command": "talaria.cancel", "arguments": []}))
    assert client.until_response(2)["result"] == {"cancelled": False}
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=TIMEOUT)


def test_an_internal_error_carries_no_traceback(tmp_path: Path) -> None:
    server = build_server(Config(home=tmp_path))
    written: list[bytes] = []

    class Writer:
        def write(self, data: bytes) -> None:
            written.append(data)

    server.protocol.set_writer(Writer())  # type: ignore[arg-type]
    try:
        raise KeyError("boom")
    except KeyError:
        error = JsonRpcInternalError.of(sys.exc_info()).to_response_error()
    assert error.data and "traceback" in error.data  # what pygls would send
    server.protocol._send_response(7, error=error)
    reply = json.loads(written[0].split(b"\r\n\r\n", 1)[1])
    assert reply["error"]["code"] == -32603 and "data" not in reply["error"]
    assert "boom" in reply["error"]["message"] and "logs" in reply["error"]["message"]
    assert "Traceback" not in json.dumps(reply) and "File " not in json.dumps(reply)


def test_a_reason_quoted_in_an_error_is_bounded() -> None:
    assert len(reason(ValueError("z" * 5000))) == MAX_REASON_CHARS


# -- command arguments -----------------------------------------------------------------------

def test_every_bad_command_argument_is_named_at_once(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.default_turn = {"text": "Done."}
    proc = spawn(tmp_path, fake_llm)
    client = RawClient(proc)
    client.send({**INITIALIZE, "params": {**INITIALIZE["params"],
                                          "rootUri": f"file://{tmp_path / 'project'}"}})
    client.until_response(1)
    client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    cases = hostile.command_cases(tmp_path / "project")
    assert len(cases) >= 20
    for number, case in enumerate(cases):
        assert proc.stdin is not None
        message = json.loads(case.data.split(b"\r\n\r\n", 1)[1])
        proc.stdin.write(frame({**message, "id": 1000 + number}))
        proc.stdin.flush()
        error = client.until_response(1000 + number).get("error")
        assert error is not None and error["code"] == -32602, (case.name, error)
        assert case.says in error["message"], (case.name, error["message"])
    client.send(request(2, "workspace/executeCommand", {"command": "talaria.ask", "arguments": ["Still there?"]}))
    assert client.until_response(2)["result"]["stopReason"] == "end_turn"
    assert fake_llm.requests and len(fake_llm.requests) == 1  # no bad one reached the model
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=TIMEOUT)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
    max_leaves=10)
positions = st.fixed_dictionaries({"line": json_values | st.integers(), "character": json_values | st.integers()})


@settings(max_examples=500, deadline=None)
@given(raw=json_values | st.fixed_dictionaries({"start": positions | json_values, "end": positions | json_values}))
def test_any_range_is_a_range_in_the_document_or_an_argument_error(raw: Any) -> None:
    text = "a\nbb\nccc\n"
    try:
        checked = prompts.check_range(raw, text, "file:///x.py")
    except prompts.ArgumentError as exc:
        assert "range" in str(exc) and "\n" not in str(exc)
        return
    start, end = checked["start"], checked["end"]
    assert all(type(v) is int and v >= 0 for p in (start, end) for v in p.values())
    assert (start["line"], start["character"]) <= (end["line"], end["character"])
    assert end["line"] < 4


@settings(max_examples=300, deadline=None)
@given(args=st.lists(json_values, max_size=3))
def test_any_arguments_are_a_prompt_and_target_or_an_argument_error(args: list[Any]) -> None:
    for parse in (prompts.split_ask, lambda a: prompts.target_arg("talaria.fix", a)):
        try:
            result = parse(args)
        except prompts.ArgumentError:
            continue
        raw = result[1] if isinstance(result, tuple) else result
        if isinstance(raw, dict):  # what _target reads next: only ArgumentError, if anything
            with contextlib.suppress(prompts.ArgumentError):
                prompts.path_of(raw.get("uri"))
            with contextlib.suppress(prompts.ArgumentError):
                prompts.diagnostics_of(raw)


def test_only_regular_files_are_read_as_documents(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "f.py").write_text("x\n")
    prompts.check_file(tmp_path / "f.py")
    for path, says in [(tmp_path / "fifo", "a FIFO"), (Path("/dev/zero"), "a device"),
                       (Path("/dev/null"), "a device"), (tmp_path, "a directory"),
                       (tmp_path / "nope", "does not exist")]:
        with pytest.raises(prompts.ArgumentError, match=says):
            prompts.check_file(path)
