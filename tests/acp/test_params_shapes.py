"""The type tables of `params` (PARAMS, RESULTS) are the official ACP v1 schema's, and cover
every method the agent handles and every answer it gets (issue 23 item 8)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from talaria.acp_server import params
from talaria.acp_server.jsonrpc import RpcError
from talaria.acp_server.params import PARAMS, RESULTS, Field, Kind
from talaria.acp_server.server import AcpServer
from talaria.agent.config import Config
from tests.acp.schema_types import Spec, fields, fits, params_kind
from tests.acpschema import methods

LIBERAL = {("session/new", "mcpServers"), ("session/load", "mcpServers"),
           ("session/resume", "mcpServers"), ("session/fork", "mcpServers"),
           ("terminal/output", "truncated")}
"""Fields the schema requires that the agent takes as absent (what real clients send)."""


class Registry:
    """Stands in for the Peer: records what AcpServer registers."""

    def __init__(self) -> None:
        self.requests: set[str] = set()
        self.notifications: set[str] = set()

    def on_request(self, method: str, handler: Any) -> None:
        self.requests.add(method)

    def on_notification(self, method: str, handler: Any) -> None:
        self.notifications.add(method)


def test_every_method_the_agent_handles_has_its_params_typed(tmp_path: Path) -> None:
    peer = Registry()
    AcpServer(peer, Config(home=tmp_path))  # type: ignore[arg-type]
    assert peer.requests | peer.notifications | {"$/cancel_request"} == set(PARAMS)


def test_every_answer_the_agent_gets_has_its_result_typed() -> None:
    asked = {m for m, defs in methods()["client"].items() if "response" in defs}
    assert asked == set(RESULTS)


def _compare(kind: Kind, spec: Spec, where: str) -> None:
    assert kind.types == spec.types, where
    assert (kind.items.types if kind.items else None) == spec.items, where
    if spec.low is not None:
        assert kind.test(spec.low) and kind.test(spec.high), where
        assert not kind.test(spec.low - 1) and not kind.test(spec.high + 1), where  # type: ignore[operator]
    if kind.fields is not None:
        _compare_fields(kind.fields, spec.fields, where + ".")


def _compare_fields(table: dict[str, Field], schema: dict[str, Spec], where: str) -> None:
    assert set(table) == set(schema), where
    for name, spec in schema.items():
        field, here = table[name], where + name
        _compare(field.kind, spec, here)
        liberal = (where.rstrip(".").split(":")[0], name) in LIBERAL
        assert field.required == (spec.required and not liberal), here
        assert field.lenient == spec.lenient, here


@pytest.mark.parametrize("method", sorted(PARAMS))
def test_params_table_is_the_schema_s(method: str) -> None:
    _compare_fields(PARAMS[method], fields(method, params_kind(method)), f"{method}:")


@pytest.mark.parametrize("method", sorted(RESULTS))
def test_results_table_is_the_schema_s(method: str) -> None:
    _compare_fields(RESULTS[method], fields(method, "response"), f"{method}:")


text = st.text(st.characters(exclude_categories=("Cs",)), max_size=5)
values = st.recursive(st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | text,
                      lambda kids: st.lists(kids, max_size=3) | st.dictionaries(text, kids, max_size=3),
                      max_leaves=6)


def _table_fits(value: Any, kind: Kind) -> bool:
    return kind.test(value) and (kind.items is None or not isinstance(value, list)
                                 or all(kind.items.test(item) for item in value))


@given(value=values | st.lists(values, max_size=3), data=st.data())
def test_a_value_fits_the_table_exactly_when_it_fits_the_schema(value: Any, data: Any) -> None:
    method = data.draw(st.sampled_from(sorted(PARAMS)))
    kind = "request" if method not in {"session/cancel", "$/cancel_request"} else "notification"
    schema = fields(method, kind)
    for name, field in PARAMS[method].items():
        assert _table_fits(value, field.kind) == fits(value, schema[name]), (method, name, value)


def test_a_wrong_type_is_a_32602_naming_the_field_and_what_came() -> None:
    with pytest.raises(RpcError) as caught:
        params.check_params("session/cancel", {"sessionId": [1]})
    assert caught.value.code == -32602
    assert caught.value.data == "`sessionId` must be a string, not an array"
    with pytest.raises(RpcError, match=r"`prompt\[1\]` must be an object, not a string"):
        params.check_params("session/prompt", {"sessionId": "s", "prompt": [{}, "x"]})
    with pytest.raises(RpcError, match="`protocolVersion` must be an integer from 0 to 65535"):
        params.check_params("initialize", {"protocolVersion": 2**70})
    with pytest.raises(RpcError, match="`modeId` is required"):
        params.check_params("session/set_mode", {"sessionId": "s"})


def test_a_field_the_schema_defaults_on_error_is_dropped_not_refused() -> None:
    got = params.check_params("initialize", {"protocolVersion": 1, "clientCapabilities": [1],
                                             "_meta": "x", "clientInfo": None})
    assert got == {"protocolVersion": 1, "clientInfo": None}


def test_unknown_methods_and_extra_fields_pass() -> None:
    assert params.check_params("_x/y", {"a": [1]}) == {"a": [1]}
    assert params.check_params("session/cancel", {"sessionId": "s", "x": 1}) == {
        "sessionId": "s", "x": 1}


@pytest.mark.parametrize(("method", "result", "reason"), [
    ("fs/read_text_file", [], "the result must be an object, not an array"),
    ("fs/read_text_file", None, "the result must be an object, not null"),
    ("fs/read_text_file", {"content": 5}, "`content` must be a string, not a number"),
    ("terminal/create", {"terminalId": None}, "`terminalId` must be a string, not null"),
    ("terminal/output", {"output": ["x"]}, "`output` must be a string, not an array"),
    ("session/request_permission", {"outcome": {"outcome": "selected", "optionId": [1]}},
     "`outcome.optionId` must be a string, not an array"),
    ("elicitation/create", {"action": {}}, "`action` must be a string, not an object"),
])
def test_a_malformed_answer_says_what_is_wrong(method: str, result: Any, reason: str) -> None:
    with pytest.raises(RpcError) as caught:
        params.check_result(method, result)
    assert caught.value.message == f"Malformed response: {reason}"


def test_answers_are_taken_liberally_where_the_schema_allows() -> None:
    assert params.check_result("fs/write_text_file", None) == {}  # CodeCompanion
    assert params.check_result("terminal/output", {"output": "x", "exitStatus": [1]}) == {
        "output": "x"}
    assert params.check_result("terminal/wait_for_exit", {"exitCode": -1, "signal": 9}) == {}
    assert params.check_result("terminal/output", {"output": "x", "exitStatus": {
        "exitCode": "1", "signal": None}}) == {"output": "x", "exitStatus": {"signal": None}}


def test_capabilities_of_a_wrong_type_advertise_nothing(tmp_path: Path) -> None:
    """The schema's `x-deserialize-default-on-error` booleans: "no" is not true."""
    from talaria.acp_server.editor_workspace import EditorWorkspace
    from talaria.tools.local.workspace import LocalWorkspace

    odd = {"fs": {"readTextFile": "yes", "writeTextFile": 1}, "terminal": "no"}
    ws = EditorWorkspace(None, "s", odd, LocalWorkspace(tmp_path))  # type: ignore[arg-type]
    assert (ws.can_read, ws.can_write, ws.can_terminal) == (False, False, False)
    real = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}
    ws = EditorWorkspace(None, "s", real, LocalWorkspace(tmp_path))  # type: ignore[arg-type]
    assert (ws.can_read, ws.can_write, ws.can_terminal) == (True, True, True)
