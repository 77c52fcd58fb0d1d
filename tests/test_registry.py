"""`editors/registry/`: Talaria's entry for the ACP agent registry.

The manifest is validated against the registry's own `agent.schema.json` (vendored in
`tests/registry/`, from agentclientprotocol/registry at commit 172d5034), with no key the schema
does not know; the icon is 16x16 and drawn in `currentColor` only; the version is Talaria's;
`uvx PACKAGE ARGS` names this distribution and a console script of the same name (what uvx
runs); and that command answers `initialize` with `authMethods`, which the registry's CI demands.
(tests/cli/test_wheel.py runs the installed `talaria-agent acp` from the built wheel.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator

from talaria.acp_server.version import VERSION
from tests import ROOT, TESTS

REGISTRY = ROOT / "editors" / "registry"
SCHEMA = TESTS / "registry" / "agent.schema.json"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
COLOURS = ("fill", "stroke", "color", "stop-color")


def manifest() -> dict[str, Any]:
    return json.loads((REGISTRY / "agent.json").read_text(encoding="utf-8"))


def test_the_manifest_is_valid_against_the_registry_schema() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    agent = manifest()
    errors = [e.message for e in Draft7Validator(
        schema, format_checker=Draft7Validator.FORMAT_CHECKER).iter_errors(agent)]
    assert not errors, errors
    assert set(agent) <= set(schema["properties"]) - {"icon"}  # the registry's build sets icon
    for key in ("id", "name", "version", "description", "license", "license_url"):
        assert agent[key], key
    assert "repository" not in agent  # none is published yet: no placeholder address


def test_a_bad_manifest_fails_the_schema() -> None:
    """The check above can fail: extra keys in a distribution, a bad id, no version."""
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    validator = Draft7Validator(schema)
    bad = {**manifest(), "id": "Talaria", "distribution": {"uvx": {"package": "x", "cmd": "x"}}}
    del bad["version"]
    messages = " ".join(e.message for e in validator.iter_errors(bad))
    assert "'version' is a required property" in messages
    assert "does not match" in messages and "Additional properties" in messages


def test_the_manifest_names_this_release_and_this_distribution() -> None:
    agent = manifest()
    assert agent["version"] == VERSION
    assert agent["license"] == PYPROJECT["license"]["text"]
    uvx = agent["distribution"]["uvx"]
    # Pinned, as every uvx/npx entry of the registry is: uvx runs the version the entry claims,
    # not whatever is newest.
    assert uvx["package"] == f"{PYPROJECT['name']}=={VERSION}" and PYPROJECT["name"] == "talaria-agent"
    assert "[" not in uvx["package"]  # a spec with extras fails the registry's checks
    assert PYPROJECT["scripts"][PYPROJECT["name"]] == PYPROJECT["scripts"]["talaria"]
    assert uvx["args"] == ["acp"]


def test_the_icon_is_16px_and_current_color() -> None:
    root = ET.parse(REGISTRY / "icon.svg").getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert (root.get("width"), root.get("height"), root.get("viewBox")) == ("16", "16", "0 0 16 16")
    colours = {el.get(a) for el in root.iter() for a in COLOURS if el.get(a) is not None}
    assert "currentColor" in colours and colours <= {"currentColor", "none"}, colours
    assert "style" not in {a for el in root.iter() for a in el.attrib}


def test_the_advertised_command_answers_initialize_with_auth_methods(tmp_path: Path) -> None:
    args = manifest()["distribution"]["uvx"]["args"]
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": 1, "clientCapabilities": {}}}
    reply = initialize([sys.executable, "-m", "talaria.acp_server", *args], request, tmp_path)
    assert reply["result"]["authMethods"], reply
    assert reply["result"]["agentInfo"]["version"] == VERSION


def initialize(command: list[str], request: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """Send one ACP `initialize` to `command` and read its reply (stdin closed after)."""
    from tests.acp_harness import server_env

    done = subprocess.run(command, input=json.dumps(request) + "\n", capture_output=True,
                          text=True, timeout=60, env=server_env(tmp_path / "home"), cwd=tmp_path,
                          check=False)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return next(m for m in lines if m.get("id") == request["id"])
