"""`talaria lsp` start-up: `initialize` is answered before pygls is loaded (`capabilities.py`),
and that answer is the one pygls builds from the same parameters; whatever comes first that is
not an `initialize` goes to pygls (through the same frame reader)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import client_capabilities

from talaria.acp_server.lsp.capabilities import initialize_result
from talaria.acp_server.lsp.frames import FrameReader, Output
from talaria.acp_server.lsp.server import build_server
from talaria.acp_server.version import version
from talaria.agent.config import Config
from tests.lsp.lsp_editor import TIMEOUT
from tests.lsp.test_lsp_stdio import RawClient, frame, spawn

CONVERTER = default_converter()


def caps(name: str | None, encodings: list[str] | None = None) -> dict[str, Any]:
    value = client_capabilities(name) if name else types.ClientCapabilities()
    if encodings is not None:
        value.general = types.GeneralClientCapabilities(position_encodings=encodings)
    return CONVERTER.unstructure(value)


def pygls_answer(params: dict[str, Any]) -> dict[str, Any]:
    """What pygls itself answers to `initialize` with `params` (its handler, run in-process)."""
    server = build_server(Config(home=Path("/nonexistent")))
    structured = CONVERTER.structure(params, types.InitializeParams)
    steps = server.protocol.lsp_initialize(structured)
    handler, args, _ = next(steps)
    handler(*args)
    with pytest.raises(StopIteration) as done:
        steps.send(None)
    return CONVERTER.unstructure(done.value.value)


@pytest.mark.parametrize("name, encodings", [
    (None, None), ("visual-studio-code", None), ("neovim", None), ("emacs", None),
    (None, ["utf-8", "utf-16"]), (None, ["utf-32"]), (None, ["latin-1", "utf-8"]), (None, ["x"]),
])
def test_the_early_answer_is_what_pygls_answers(name: str | None, encodings: list[str] | None) -> None:
    params = {"processId": None, "rootUri": None, "capabilities": caps(name, encodings)}
    assert initialize_result(params, version()) == pygls_answer(params)


def test_the_first_frame_is_read_and_replayed_byte_for_byte(tmp_path: Path) -> None:
    stream = frame({"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {}})
    stream += frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    path = tmp_path / "in"
    path.write_bytes(stream)
    with path.open("rb") as stdin, (tmp_path / "out").open("wb") as stdout:
        replayed = FrameReader(stdin, Output(stdout))
        message = replayed.message()
        assert message is not None and message["id"] == 7
        again = b""
        while line := replayed.readline():
            again += line
            if line == b"\r\n":
                again += replayed.read(int(again.split(b": ")[-1].split(b"\r\n")[0]))
    assert again == stream


@pytest.mark.parametrize("first, answer", [
    ({"jsonrpc": "2.0", "id": 1, "method": "shutdown"}, "error"),  # -32002: not initialized
    ({"jsonrpc": "2.0", "id": 1, "method": "initialize"}, "error"),  # no params
    ({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": 3}}, "error"),
])
def test_anything_else_first_goes_to_pygls(tmp_path: Path, first: dict[str, Any],
                                           answer: str) -> None:
    proc = spawn(tmp_path, None)
    client = RawClient(proc)
    client.send(first)
    reply = client.until_response(1)
    assert answer in reply, reply
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=TIMEOUT)


def test_garbage_before_the_first_frame_does_not_crash_the_server(tmp_path: Path) -> None:
    proc = spawn(tmp_path, None)
    assert proc.stdin is not None
    proc.stdin.write(b"hello\r\n\r\n")
    proc.stdin.flush()
    client = RawClient(proc)
    client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"processId": None, "rootUri": None, "capabilities": {}}})
    assert client.until_response(1)["result"]["serverInfo"]["name"] == "talaria"
    proc.stdin.close()
    proc.wait(timeout=TIMEOUT)
