"""What providers are sent for an MCP tool: names and schemas made acceptable to OpenAI and
Anthropic whatever the server sent; where servers come from and how names are kept apart."""

from __future__ import annotations

import json
import re

import pytest

from talaria.tools.mcp.schema import MAX_NAME, MAX_SCHEMA_CHARS, PROPERTY_KEY, sanitize, tool_name
from talaria.tools.mcp.settings import combine, from_acp, from_config, parse_server
from tests.mcp_server import WEIRD_SCHEMA, huge_schema

OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def walk(schema: object):
    if isinstance(schema, dict):
        yield schema
        for value in schema.values():
            yield from walk(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from walk(value)


def assert_provider_safe(params: dict) -> None:
    assert params["type"] == "object" and isinstance(params["properties"], dict)
    assert not {"anyOf", "oneOf", "allOf", "not", "enum"} & params.keys()  # OpenAI's top level
    assert all(PROPERTY_KEY.match(k) for k in params["properties"])  # Anthropic's keys
    for node in walk(params):
        assert "$ref" not in node and "$defs" not in node and "$schema" not in node
        if node.get("type") == "array":
            assert "items" in node
        assert all(r in node.get("properties", {}) for r in node.get("required", ()))
    json.dumps(params)


def test_a_schema_full_of_what_providers_reject_is_rewritten() -> None:
    schema = sanitize(WEIRD_SCHEMA)
    params = schema.parameters
    assert_provider_safe(params)
    assert params["required"] == ["file_path"]  # "missing" is no property
    assert schema.renames == {"file_path": "file path"}
    assert params["properties"]["mode"] == {"type": "string", "enum": ["fast", "slow"]}
    assert params["properties"]["tags"] == {"type": "array", "items": {}}
    assert params["properties"]["flag"] == {} and params["properties"]["count"] == {}
    assert params["properties"]["extra"] == {"type": "string"}  # from the top-level anyOf
    depth, node = 0, params["properties"]["node"]
    while node.get("properties"):  # a recursive $ref is inlined a few times, then open
        node, depth = node["properties"]["child"], depth + 1
    assert 1 <= depth <= 4


@pytest.mark.parametrize("raw", [None, "a string", 42, [], {"type": "array"}, {"properties": "x"},
                                 {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}])
def test_junk_becomes_a_usable_object_schema(raw: object) -> None:
    assert_provider_safe(sanitize(raw).parameters)


def test_a_huge_schema_is_replaced_and_the_description_says_so() -> None:
    raw = huge_schema()
    assert len(json.dumps(raw)) > MAX_SCHEMA_CHARS
    schema = sanitize(raw)
    assert schema.parameters == {"type": "object", "properties": {}, "additionalProperties": True}
    assert "too large to send" in schema.problems[0]


def test_a_deep_schema_is_cut() -> None:
    raw: dict = {"type": "object", "properties": {}}
    node = raw
    for _ in range(50):
        child: dict = {"type": "object", "properties": {}}
        node["properties"]["x"] = child
        node = child
    text = json.dumps(sanitize(raw).parameters)
    assert text.count('"x"') < 20


def test_tool_names_fit_every_provider_and_stay_distinct() -> None:
    assert tool_name("github", "create-issue") == "mcp__github__create_issue"
    assert tool_name("my server!", "ünïcode tool") == "mcp__my_server__n_code_tool"
    long_a, long_b = tool_name("s" * 40, "t" * 40 + "a"), tool_name("s" * 40, "t" * 40 + "b")
    assert len(long_a) == MAX_NAME and long_a != long_b
    for name in (long_a, tool_name("", ""), tool_name("a.b", "c/d")):
        assert OPENAI_NAME.match(name) and name.isidentifier()


def test_servers_from_the_editor_and_from_config() -> None:
    editor = from_acp([
        {"name": "fs", "command": "/bin/fs", "args": ["--root", "/p"], "env": [{"name": "A", "value": "1"}]},
        {"type": "http", "name": "api", "url": "https://mcp.example.com/mcp",
         "headers": [{"name": "Authorization", "value": "Bearer t"}]},
        {"type": "sse", "name": "events", "url": "http://127.0.0.1:9/sse", "headers": []},
    ])
    assert [(s.name, s.transport, s.origin) for s in editor] == [
        ("fs", "stdio", "editor"), ("api", "http", "editor"), ("events", "sse", "editor")]
    assert editor[0].env == {"A": "1"} and editor[1].headers == {"Authorization": "Bearer t"}
    config = {"fs": {"allow": ["read_*"], "deny": ["read_secret"]},  # a filter for the editor's
              "fs-2": {"command": "other"}, "gh": {"url": "https://x/mcp", "headers": {"H": "v"}}}
    servers = combine(editor, config)
    assert [s.name for s in servers] == ["fs", "api", "events", "fs-2", "gh"]
    assert servers[0].offers("read_file") and not servers[0].offers("read_secret")
    assert not servers[0].offers("write_file")
    assert from_config({"gh": {"url": "https://x/mcp"}})[0][0].transport == "http"


def test_names_that_collide_are_kept_apart() -> None:
    a = parse_server({"name": "demo", "command": "x"}, origin="editor")
    b = parse_server({"name": "demo", "command": "y"}, origin="editor")
    c = parse_server({"name": "de-mo", "command": "z"}, origin="editor")
    d = parse_server({"name": "de_mo", "command": "z"}, origin="editor")
    assert [s.name for s in combine([a, b, c, d], {})] == ["demo", "demo_2", "de-mo", "de_mo_2"]


@pytest.mark.parametrize("entry, message", [
    ({"command": "x"}, "needs a non-empty `name`"),
    ({"name": "a"}, "give `command`"),
    ({"name": "a", "command": ""}, "`command` must be a non-empty string"),
    ({"name": "a", "command": "x", "args": "--flag"}, "`args` must be a list of strings"),
    ({"name": "a", "command": "x", "env": [{"name": "A"}]}, "needs a non-empty name and a string value"),
    ({"type": "http", "name": "a", "url": "ftp://x"}, "must be an http(s) URL"),
    ({"type": "ws", "name": "a", "url": "ws://x"}, "give `command`"),
    ("nope", "must be an object"),
])
def test_bad_entries_say_what_is_wrong(entry: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        from_acp([entry])
