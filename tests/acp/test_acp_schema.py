"""The ACP schema helper the other tests rely on: it accepts good transcripts, rejects bad
messages, checks a result against its request's method."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.acpschema import Recorder, SchemaViolation, parse_line, validate_message

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": 1,
        "clientCapabilities": {
            "fs": {"readTextFile": True, "writeTextFile": True},
            "terminal": True,
        },
    },
}
INITIALIZED = {
    "jsonrpc": "2.0",
    "id": 0,
    "result": {
        "protocolVersion": 1,
        "agentCapabilities": {"loadSession": True, "promptCapabilities": {"image": True}},
        "authMethods": [],
        "agentInfo": {"name": "talaria", "title": "Talaria", "version": "0.1.0"},
    },
}


def update(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s1", "update": body},
    }


def test_schema_accepts_a_good_transcript() -> None:
    rec = Recorder()
    rec.record("client->agent", json.dumps(INITIALIZE) + "\n")
    assert rec.unanswered() == {0: "initialize"}
    rec.record("agent->client", INITIALIZED)
    rec.record(
        "agent->client",
        update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}),
    )
    rec.record(
        "agent->client",
        update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "call_1",
                "title": "Read a.py",
                "kind": "read",
                "status": "pending",
                "locations": [{"path": "/p/a.py", "line": 3}],
                "rawInput": {"path": "a.py"},
            }
        ),
    )
    rec.record(
        "agent->client",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "fs/read_text_file",
            "params": {"sessionId": "s1", "path": "/p/a.py"},
        },
    )
    rec.record("client->agent", {"jsonrpc": "2.0", "id": 1, "result": {"content": "x = 1\n"}})
    rec.record(
        "client->agent",
        {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 5}},
    )
    rec.record(
        "agent->client",
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}},
    )
    rec.record(
        "agent->client",
        {"jsonrpc": "2.0", "method": "_talaria/anything", "params": {"free": "form"}},
    )
    assert rec.unanswered() == {}
    assert [u["sessionUpdate"] for u in rec.updates()] == ["agent_message_chunk", "tool_call"]
    assert len(rec.messages("client->agent")) == 3


@pytest.mark.parametrize(
    ("direction", "message", "complaint"),
    [
        (
            "agent->client",
            update({"sessionUpdate": "tool_call", "title": "Read", "kind": "read"}),
            "'toolCallId' is a required property",
        ),
        (
            "agent->client",
            update({"sessionUpdate": "tool_call", "toolCallId": "a", "title": "t", "kind": "look"}),
            "'look' is not one of ['read'",
        ),
        (
            "agent->client",
            update(
                {"sessionUpdate": "agent_message_chunk", "content": {"type": "txt", "text": "x"}}
            ),
            "content.type: 'txt' is not one of",
        ),
        (
            "agent->client",
            update({"sessionUpdate": "agent_said", "content": {}}),
            "unknown sessionUpdate 'agent_said'",
        ),
        (
            "agent->client",
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"update": {"sessionUpdate": "plan", "entries": []}},
            },
            "'sessionId' is a required property",
        ),
        (
            "agent->client",
            {"jsonrpc": "2.0", "id": 1, "method": "session/cancel", "params": {"sessionId": "s"}},
            "not an ACP v1 method that the client handles",
        ),
        (
            "client->agent",
            {"jsonrpc": "2.0", "id": 1, "method": "session/cancel", "params": {"sessionId": "s"}},
            "sent as a request, but ACP defines it as a notification",
        ),
        (
            "client->agent",
            {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"mcpServers": []}},
            "'cwd' is a required property",
        ),
        (
            "agent->client",
            {"jsonrpc": "2.0", "id": 1, "error": {"code": "bad", "message": "x"}},
            "error.code",
        ),
        (
            "agent->client",
            {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "x"}},
            "exactly one of result/error",
        ),
        ("agent->client", {"jsonrpc": "2.0", "id": 77, "result": {}}, "answers no pending request"),
        (
            "agent->client",
            {"id": 1, "method": "session/update", "params": {}},
            'jsonrpc must be "2.0"',
        ),
    ],
)
def test_schema_rejects_bad_messages(
    direction: Any, message: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(SchemaViolation) as caught:
        Recorder().record(direction, message)
    assert complaint in str(caught.value)


def test_schema_checks_a_result_against_the_method_of_its_request() -> None:
    rec = Recorder()
    rec.record(
        "client->agent",
        {
            "jsonrpc": "2.0",
            "id": "n",
            "method": "session/new",
            "params": {"cwd": "/p", "mcpServers": []},
        },
    )
    with pytest.raises(
        SchemaViolation, match="session/new result: 'sessionId' is a required property"
    ):
        rec.record("agent->client", {"jsonrpc": "2.0", "id": "n", "result": {"modes": None}})
    # CodeCompanion answers fs/write_text_file with null; the schema wants an object.
    rec.record(
        "agent->client",
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "fs/write_text_file",
            "params": {"sessionId": "s", "path": "/p/a", "content": ""},
        },
    )
    with pytest.raises(SchemaViolation, match="fs/write_text_file result"):
        validate_message(
            {"jsonrpc": "2.0", "id": 2, "result": None}, "client->agent", {2: "fs/write_text_file"}
        )


def test_schema_lines_must_be_single_line_utf8_json() -> None:
    with pytest.raises(SchemaViolation, match="one line"):
        parse_line('{"jsonrpc":\n"2.0"}\n')
    with pytest.raises(SchemaViolation, match="not UTF-8"):
        parse_line(b"\xff\n")
    assert parse_line(b'{"a":1}\n') == {"a": 1}
