"""Protocol fuzzing of a real `talaria acp` (issue 9): no line can kill it, every answer is right.

Hypothesis generates lines, seeded (reproducible), against ONE long-running server: random JSON
values, requests for every ACP method with wrongly-shaped params, weird ids (floats, 1e999, NaN,
int64 overflow, booleans, lone surrogates), huge and deep nesting, invalid UTF-8, lone
surrogates as `\\ud800` escapes and as raw bytes, random method names, notifications, and
responses to requests never made. An independent oracle (JSON-RPC 2.0 + the ACP schema) says
what each line must get:

    not JSON (strictly: no NaN)      one -32700 with id null
    JSON, not an object (a batch)     one -32600 with id null (ACP v1 has no batches)
    a notification: no id, jsonrpc   nothing: a notification is never answered, whatever
      "2.0", a string `method`          its params
    no id, but not a notification     one -32600 with id null (JSON-RPC 2.0, section 7:
      (method not a string, jsonrpc     `{"jsonrpc":"2.0","method":1,"params":"bar"}`)
      not "2.0")
    no `method`, result or error      nothing: an answer to nothing
    anything else                     one answer: id null (-32600) if the id is not a string,
                                      an int64 or null; else with that id

Counted and reported: cases, crashes (the server died; it is restarted), hangs (no answer
within HANG_S), wrong codes (outside JSON-RPC/ACP/Talaria's, -32603 which is a bug, not the one
the oracle requires, or an error carrying a traceback), answered notifications, errors logged
(an ERROR line or a traceback in stderr or the log file), schema problems. All must be 0.

    TALARIA_FUZZ_CASES=20000 pytest tests/acp/test_fuzz.py     # more on demand
    TALARIA_FUZZ_SEED=7 pytest tests/acp/test_fuzz.py           # another seed
    pytest -m deep tests/acp/test_fuzz.py                        # the big run, every seed
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from talaria.acp_server.wire import MAX_PARSE_DEPTH
from tests.acp.fuzz_agent import ACP_CODES, JSON_RPC_CODES, NULL, TALARIA_CODES, FuzzAgent
from tests.acpschema import methods, schema

SEEDS = (20261130, 20261201)
"""Issue 9's seed, and issue 23's (a new one: testers retry with seeds of their own)."""
SEED = int(os.environ.get("TALARIA_FUZZ_SEED", SEEDS[-1]))
CI_CASES = int(os.environ.get("TALARIA_FUZZ_CASES", "3000"))
SLOW_CASES = int(os.environ.get("TALARIA_FUZZ_SLOW_CASES", "30000"))
HANG_S = 10.0
"""Seconds an answer may take before the case counts as a hang (the fake LLM is instant)."""
INT64 = 2**63
LONE = re.compile("[\ud800-\udfff]")
AGENT_METHODS = sorted(methods()["agent"])
OTHER_METHODS = [*sorted(methods()["client"]), "$/cancel_request", "_talaria/x", "session/fly"]


def _properties(method: str) -> list[str]:
    defs = methods()["agent"][method]
    definition = schema()["$defs"][defs.get("request") or defs["notification"]]
    return list(definition.get("properties", {}))


PROPERTIES = {m: _properties(m) for m in AGENT_METHODS}


# -- generation ---------------------------------------------------------------------------------

text = st.text(st.characters(codec=None, categories=None), max_size=20)  # lone surrogates too
scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False,
                                                                             allow_infinity=False) | text
json_values = st.recursive(scalars, lambda kids: st.lists(kids, max_size=4)
                           | st.dictionaries(text, kids, max_size=4), max_leaves=12)
RAW_IDS = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1.5", "1.0", "-0.0", "true",
           "false", "[]", "{}", "[1]", '"\\ud800"', '"a\\udfffb"', str(INT64), str(-INT64 - 1),
           "1" + "0" * 5000, "null", "0", '""']


@st.composite
def plausible(draw: st.DrawFn, agent_ids: tuple[str, str]) -> Any:
    """A value an editor might really send: real ids and paths, wrong ones, prompt blocks."""
    session_id, project = agent_ids
    return draw(st.sampled_from([session_id, project, project + "/missing", "relative/dir",
                                 "/", "\x00", "", "default", "plan", "bypass", "mode", "model",
                                 "setup", "openai:other", "x" * 5000]) | json_values
                | st.lists(st.fixed_dictionaries({"type": st.sampled_from(
                    ["text", "image", "resource", "resource_link", "audio", "x"])},
                    optional={"text": text | json_values, "uri": st.sampled_from(
                        ["file:///etc/hostname", f"file://{project}/missing", "http://x"]) | text,
                        "data": text, "mimeType": text, "resource": json_values}), max_size=3))


@st.composite
def params_for(draw: st.DrawFn, method: str, agent_ids: tuple[str, str]) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(json_values)  # not even an object, sometimes
    keys = PROPERTIES.get(method) or []
    chosen = draw(st.lists(st.sampled_from(keys), unique=True)) if keys else []
    params = {k: draw(plausible(agent_ids)) for k in chosen}
    params.update(draw(st.dictionaries(text, json_values, max_size=2)))
    return params


@dataclass
class Case:
    line: bytes
    method: str | None = None
    id: Any = NULL
    notes: list[str] = field(default_factory=list)


def _dumps(value: Any, raw: bool) -> bytes:
    """JSON text; `raw` writes lone surrogates as raw (surrogatepass) bytes, not escapes."""
    if raw:
        return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return json.dumps(value).encode()


@st.composite
def cases(draw: st.DrawFn, agent_ids: tuple[str, str]) -> Case:
    kind = draw(st.sampled_from(["message", "message", "message", "message", "value", "bytes",
                                 "deep", "response"]))
    if kind == "bytes":
        return Case(draw(st.binary(max_size=300)).replace(b"\n", b" "))
    if kind == "value":
        return Case(_dumps(draw(json_values), draw(st.booleans())))
    if kind == "deep":
        levels = draw(st.sampled_from([50, 99, 100, 101, 150, 499, 500, 501, 999, 5000, 100_000]))
        opener, closer = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}")]))
        inner = opener * levels + b"1" + closer * levels * draw(st.sampled_from([1, 0]))
        if draw(st.booleans()):
            return Case(inner)
        return Case(b'{"jsonrpc":"2.0","id":"deep","method":"session/list","params":{"x":'
                    + inner + b"}}")
    message: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        message["jsonrpc"] = "2.0" if draw(st.integers(0, 9)) else draw(json_values)
    if kind == "response":
        message[draw(st.sampled_from(["result", "error"]))] = draw(json_values)
        message["id"] = draw(json_values)
        return Case(_dumps(message, draw(st.booleans())))
    method = draw(st.sampled_from(AGENT_METHODS) | st.sampled_from(OTHER_METHODS) | text
                  | json_values)
    if draw(st.integers(0, 19)):
        message["method"] = method
    if isinstance(method, str) and draw(st.integers(0, 9)):
        message["params"] = draw(params_for(method, agent_ids))
    elif draw(st.booleans()):
        message["params"] = draw(json_values)
    id_kind = draw(st.sampled_from(["int", "str", "none", "absent", "raw", "raw", "value"]))
    if id_kind == "int":
        message["id"] = draw(st.integers(-(2**63), 2**63 - 1))
    elif id_kind == "str":
        message["id"] = draw(text)
    elif id_kind == "none":
        message["id"] = None
    elif id_kind == "value":
        message["id"] = draw(json_values)
    line = _dumps(message, draw(st.booleans()))
    if id_kind == "raw":  # an id Python's json takes but JSON-RPC or the schema does not
        body = line[1:] if line != b"{}" else b"}"
        line = b'{"id":' + draw(st.sampled_from(RAW_IDS)).encode() + (b"," if body != b"}" else b"") + body
    mutation = draw(st.sampled_from([None] * 8 + ["truncate", "bad_utf8"]))
    # Positions drawn independently of the line's length: the run stays the same for a seed
    # whatever the length of the temporary paths in it.
    where = draw(st.integers(0, 2**20))
    if mutation == "truncate" and len(line) > 2:
        line = line[: 1 + where % (len(line) - 1)]
    elif mutation == "bad_utf8":
        at = where % (len(line) + 1)
        line = line[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80"])) + line[at:]
    return Case(line, method if isinstance(method, str) else None)


KNOWN = [  # the lines of issue 9 and their variants, run before the generated ones
    b'{"jsonrpc":"2.0","id":1e999,"method":"session/list","params":{}}',
    b'{"jsonrpc":"2.0","id":NaN,"method":"session/list","params":{}}',
    b'{"jsonrpc":"2.0","id":Infinity,"method":"session/list","params":{}}',
    b'{"jsonrpc":"2.0","id":1.5,"method":"session/list","params":{}}',
    b'{"jsonrpc":"2.0","id":9223372036854775808,"method":"session/list","params":{}}',
    b'{"jsonrpc":"2.0","id":true,"method":"session/list","params":{}}',
    b"[" * 100_000,
    b'{"jsonrpc":"2.0","id":2,"method":"session/list","params":{"x":' + b"[" * 100_000 + b"}}",
    b'{"method":"session/cancel","params":5}',
    b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":NaN}}',
    b'{"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":"\\ud800",'
    b'"cwd":"/","mcpServers":[]}}',
    b'{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"\\udfff",'
    b'"prompt":[{"type":"text","text":"\\ud800"}]}}',
    b'{"jsonrpc":"2.0","id":5,"method":"session/new","params":{"cwd":"/tmp/\xed\xa0\x80",'
    b'"mcpServers":[]}}',
    b'{"jsonrpc":"2.0","id":6,"result":{}}',
    b"\xff\xfe",
    # Issue 23: a notification with a wrong-typed field, lines without id that are no
    # notification, JSON-RPC 2.0's own examples (section 7), ids that are objects or arrays.
    b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":[1]}}',
    b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":{}}}',
    b'{"jsonrpc":"2.0","method":{}}',
    b'{"jsonrpc":"2.0","method":5}',
    b'{"jsonrpc":"2.0","method":1,"params":"bar"}',
    b'{"jsonrpc":"1.0","method":"session/cancel","params":{}}',
    b'{"method":"session/cancel","params":{}}',
    b'{"jsonrpc":"2.0","method":"foobar, "params": "bar", "baz]',
    b'[{"jsonrpc":"2.0","method":"sum","params":[1,2,4],"id":"1"},{"jsonrpc":"2.0","method"]',
    b"[]",
    b"[1]",
    b"[1,2,3]",
    b'[{"jsonrpc":"2.0","method":"session/list","params":{},"id":"b"}]',
    b'{"jsonrpc":"2.0","method":"foobar","id":"1"}',
    b'{"jsonrpc":"2.0","method":"session/list","params":[42,23],"id":2}',
    b'{"jsonrpc":"2.0","id":{},"method":"session/list"}',
    b'{"jsonrpc":"2.0","id":[1],"method":"session/list"}',
    b'{"jsonrpc":"2.0","id":false,"method":"session/list"}',
    b'{"jsonrpc":"2.0","id":7}',
    b'{"jsonrpc":"2.0","id":7,"result":{},"error":{"code":1,"message":"x"}}',
    b'{"jsonrpc":"2.0","id":8,"method":"session/set_mode","params":{"sessionId":[1],'
    b'"modeId":{}}}',
    b'{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":1e400}}',
]


# -- the oracle -----------------------------------------------------------------------------------

def _no_constant(name: str) -> Any:
    raise ValueError(name)


def depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def valid_id(value: Any) -> bool:
    """JSON-RPC's id as the ACP schema allows it (RequestId: null, int64, string), and echoable."""
    if value is None:
        return True
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return -INT64 <= value < INT64
    return isinstance(value, str) and not LONE.search(value)


@dataclass(frozen=True)
class Expected:
    answered: bool
    id: Any = NULL
    code: int | None = None  # a required error code, or None: any correct answer


def expect(line: bytes) -> Expected:
    if not line.strip():
        return Expected(False)
    try:
        msg = json.loads(line, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return Expected(True, None, -32700)
    if depth(msg) > MAX_PARSE_DEPTH:  # the server's documented limit: not parsed at all
        return Expected(True, None, -32700)
    if not isinstance(msg, dict):
        return Expected(True, None, -32600)
    if "method" in msg and "id" not in msg:
        if msg.get("jsonrpc") == "2.0" and isinstance(msg["method"], str):
            return Expected(False)  # a notification
        return Expected(True, None, -32600)  # no notification: an invalid request
    if "method" not in msg and ("result" in msg or "error" in msg):
        return Expected(False)  # an answer to nothing
    if not valid_id(msg.get("id")):
        return Expected(True, None, -32600)
    if msg.get("jsonrpc") != "2.0" or not isinstance(msg.get("method"), str):
        return Expected(True, msg.get("id"), -32600)
    return Expected(True, msg.get("id"))


# -- the run ----------------------------------------------------------------------------------------

@dataclass
class Tally:
    cases: int = 0
    answered: int = 0
    crashes: int = 0
    hangs: int = 0
    wrong_codes: int = 0
    answered_notifications: int = 0
    errors_logged: int = 0
    logged: int = 0  # ERROR lines and tracebacks seen so far
    examples: list[str] = field(default_factory=list)

    def bad(self, what: str, case: Case, detail: Any) -> None:
        if len(self.examples) < 20:
            self.examples.append(f"{what}: {case.line[:200]!r} -> {str(detail)[:300]}")


def run_case(agent: FuzzAgent, case: Case, tally: Tally) -> None:
    tally.cases += 1
    expected = expect(case.line)
    agent.send(case.line, case.method, expected.id if expected.answered else NULL)
    if expected.answered:
        answer = agent.answer(NULL if expected.id is None else expected.id, HANG_S)
        if answer is None:
            tally.hangs += 1
            tally.bad("hang" if agent.alive() else "crash", case, "no answer")
        else:
            tally.answered += 1
            code = answer.get("error", {}).get("code") if "error" in answer else None
            allowed = JSON_RPC_CODES | ACP_CODES | TALARIA_CODES
            if code is not None and (code not in allowed or code == -32603
                                     or expected.code not in (None, code)
                                     or "Traceback" in json.dumps(answer)):
                tally.wrong_codes += 1
                tally.bad("wrong code", case, answer["error"])
            elif expected.code is not None and code is None:
                tally.wrong_codes += 1
                tally.bad("should have failed", case, answer)
    else:
        sentinel = f"sentinel-{tally.cases}"
        agent.request("session/list", {}, sentinel) if agent.alive() else None
    if stray := [a for a in agent.unclaimed() if a.get("id") != "deep"]:
        tally.answered_notifications += len(stray)
        tally.bad("answered a notification or answered twice", case, stray)
    if len(logged := agent.log_problems()) > tally.logged:
        tally.errors_logged += 1
        tally.bad("logged an error", case, logged[tally.logged:][:3])
        tally.logged = len(logged)
    if not agent.alive():
        tally.crashes += 1
        tally.bad("crash", case, bytes(agent.stderr[-500:]).decode(errors="replace"))
        agent.restart()
        setup(agent)


def setup(agent: FuzzAgent) -> tuple[str, str]:
    agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}}, "setup-init")
    new = agent.request("session/new", {"cwd": str(agent.project), "mcpServers": []}, "setup-new")
    return new["result"]["sessionId"], str(agent.project)


def fuzz(tmp_path: Path, llm: Any, examples: int, capsys: pytest.CaptureFixture[str],
         fuzz_seed: int = SEED) -> None:
    llm.default_turn = {"text": "ok"}
    agent = FuzzAgent(tmp_path, llm)
    tally = Tally()
    try:
        agent_ids = setup(agent)
        for line in KNOWN:
            run_case(agent, Case(line), tally)

        @seed(fuzz_seed)
        @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
                  suppress_health_check=list(HealthCheck))
        @given(case=cases(agent_ids))
        def one(case: Case) -> None:
            run_case(agent, case, tally)

        one()
    finally:
        agent.close()
    report = {"fuzz_cases": tally.cases, "answered": tally.answered, "crashes": tally.crashes,
              "hangs": tally.hangs, "wrong_codes": tally.wrong_codes,
              "answered_notifications": tally.answered_notifications,
              "errors_logged": tally.errors_logged, "schema_problems": len(agent.problems),
              "seed": fuzz_seed}
    with capsys.disabled():
        print("\n" + json.dumps(report))
    problems = tally.examples + agent.problems[:20]
    assert not problems, json.dumps(report) + "\n" + "\n".join(problems)
    assert tally.cases >= examples * 0.9 + len(KNOWN)  # hypothesis ran (nearly) all it was asked for


def test_protocol_fuzz(tmp_path: Path, fake_llm: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fuzz(tmp_path, fake_llm, CI_CASES, capsys)


@pytest.mark.deep
@pytest.mark.parametrize("fuzz_seed", SEEDS)
def test_protocol_fuzz_big_run(tmp_path: Path, fake_llm: Any, capsys: pytest.CaptureFixture[str],
                               fuzz_seed: int) -> None:
    fuzz(tmp_path, fake_llm, SLOW_CASES, capsys, fuzz_seed)
