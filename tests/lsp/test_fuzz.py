"""Protocol fuzzing of a real `talaria lsp` (issue 23): no bytes kill it, every answer is right.

Hypothesis generates cases, seeded (reproducible), against ONE long-running, initialized
server. A case is a frame, its header well-formed or broken (lengths that are not numbers,
shorter than the body, missing, twice; lines without a colon, too long, too many; garbage
before it), around a body: random JSON values and bytes, requests and notifications for every
LSP method with wrongly-shaped params, `talaria.*` commands with bad arguments (ranges, URIs
of a directory, a FIFO, /dev/zero, a missing file), weird ids, deep nesting, responses to
nothing. After each case a probe request must be answered (the server still reads frames).
An independent oracle (JSON-RPC 2.0 + LSP's rules) says what each case must get:

    a broken header block         one -32700 with id null, and the body it hid is never answered
    a length shorter than a body  the bytes it covers read as the body, the rest as garbage
    a broken line, then a frame   one -32700 with id null, then the frame as usual
    garbage, then a frame         at most one -32700 with id null, then the frame as usual
    a body that is not JSON       one -32700 with id null
    JSON, not an object           one -32600 with id null
    nested deeper than MAX_DEPTH  one -32600 (with the request's id, or null)
    a notification (no id)        nothing, however wrong
    a response (result / error)   nothing
    anything else                 one answer: id null (-32600) if the id is not an integer or
                                  a string; else with that id: -32600 for a bad jsonrpc or
                                  method, -32602 for params that are not an object, ...

Counted and reported: cases, crashes (the server died; restarted), hangs (no answer within
HANG_S), wrong codes (outside JSON-RPC's and LSP's, -32603 which is a bug, or not the one the
oracle requires), answered notifications, stdout problems. All must be 0.

    TALARIA_LSP_FUZZ_CASES=5000 pytest tests/lsp/test_fuzz.py      # more on demand
    TALARIA_LSP_FUZZ_SEED=7 pytest tests/lsp/test_fuzz.py           # another seed
    pytest -m deep tests/lsp/test_fuzz.py                           # the big run
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
from lsprotocol import types

from talaria.acp_server.lsp.capabilities import COMMANDS
from talaria.acp_server.lsp.frames import MAX_DEPTH, MAX_HEADER_LINE_BYTES, MAX_HEADERS
from tests.lsp.fuzz_server import FuzzServer

SEED = int(os.environ.get("TALARIA_LSP_FUZZ_SEED", "20261201"))
CI_CASES = int(os.environ.get("TALARIA_LSP_FUZZ_CASES", "500"))
DEEP_CASES = int(os.environ.get("TALARIA_LSP_FUZZ_DEEP_CASES", "20000"))
HANG_S = 10.0
"""Seconds an answer may take before the case counts as a hang (the fake LLM is instant)."""
CODES = {-32700, -32600, -32601, -32602, -32002, -32800, -32801, -32802, -32803}
"""JSON-RPC's and LSP's error codes; -32603 (internal error) is a bug here."""
LIFECYCLE = {"exit", "shutdown"}
"""Not sent by the fuzz: they end the session (test_lsp_frames.py covers them)."""
METHODS = sorted(set(types.METHOD_TO_TYPES) - LIFECYCLE) + ["talaria/x", "", "$/x"]
NOTIFICATION_METHODS = {m for m, kinds in types.METHOD_TO_TYPES.items() if kinds[1] is None}
_ENGTH = re.compile(rb"ength", re.IGNORECASE)

# -- generation ---------------------------------------------------------------------------------

text = st.text(st.characters(codec=None, categories=None), max_size=20)  # lone surrogates too
scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False,
                                                                             allow_infinity=False) | text
json_values = st.recursive(scalars, lambda kids: st.lists(kids, max_size=4)
                           | st.dictionaries(text, kids, max_size=4), max_leaves=12)


def places(project: Path) -> list[str]:
    return [f"file://{project}/a.py", f"file://{project}/dir", f"file://{project}/fifo",
            "file:///dev/zero", f"file://{project}/missing.py", "untitled:1", "http://x/a.py", ""]


def positions() -> st.SearchStrategy[Any]:
    number = st.sampled_from([0, 1, 2, -1, 2**31, 2**64, 10**30]) | st.floats(0, 3) | text
    return st.fixed_dictionaries({"line": number, "character": number}) | json_values


@st.composite
def targets(draw: st.DrawFn, project: Path) -> Any:
    ranges = st.fixed_dictionaries({"start": positions(), "end": positions()}) | json_values
    target = {"uri": draw(st.sampled_from(places(project)) | json_values), "range": draw(ranges)}
    if draw(st.booleans()):
        target["diagnostics"] = draw(st.lists(st.fixed_dictionaries(
            {"message": text | json_values}), max_size=2) | json_values)
    if draw(st.integers(0, 3)) == 0:
        target["prompt"] = draw(text | json_values)
    return target


@st.composite
def params_for(draw: st.DrawFn, method: str, project: Path) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(json_values)  # not even an object, sometimes
    if method == "workspace/executeCommand":
        arguments = st.lists(st.sampled_from(["why?", "", "x" * 3000]) | targets(project)
                             | json_values, max_size=3)
        return {"command": draw(st.sampled_from([*COMMANDS, "talaria.nope"]) | json_values),
                "arguments": draw(arguments | json_values)}
    plausible = (st.sampled_from(places(project)).map(lambda uri: {"uri": uri, "text": "x = 1\n",
                                                                   "version": 1})
                 | positions() | json_values)
    keys = ["textDocument", "position", "range", "context", "query", "token", "value", "id"]
    return draw(st.dictionaries(st.sampled_from(keys), plausible, max_size=3))


@st.composite
def bodies(draw: st.DrawFn, project: Path) -> bytes:
    kind = draw(st.sampled_from(["message"] * 6 + ["value", "bytes", "deep", "response"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "value":
        return json.dumps(draw(json_values)).encode()
    if kind == "deep":
        levels = draw(st.sampled_from([MAX_DEPTH - 2, MAX_DEPTH, MAX_DEPTH + 1, 999, 5000, 100_000]))
        inner = b"[" * levels + b"1" + b"]" * levels * draw(st.sampled_from([1, 0]))
        if draw(st.booleans()):
            return inner
        return b'{"jsonrpc":"2.0","id":"deep","method":"textDocument/hover","params":{"x":' + inner + b"}}"
    message: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        message["jsonrpc"] = "2.0" if draw(st.integers(0, 9)) else draw(json_values)
    if kind == "response":
        message[draw(st.sampled_from(["result", "error"]))] = draw(json_values)
        message["id"] = draw(json_values)
        return json.dumps(message).encode()
    method = draw(st.sampled_from(METHODS) | text | json_values)
    if isinstance(method, str) and method in LIFECYCLE:
        method = f"x/{method}"
    if draw(st.integers(0, 19)):
        message["method"] = method
    if isinstance(method, str) and draw(st.integers(0, 9)):
        message["params"] = draw(params_for(method, project))
    elif draw(st.booleans()):
        message["params"] = draw(json_values)
    id_kind = draw(st.sampled_from(["int", "int", "str", "none", "absent", "value"]))
    if id_kind == "int":
        message["id"] = draw(st.integers(-(2**63), 2**63))
    elif id_kind == "str":
        message["id"] = draw(text)
    elif id_kind == "none":
        message["id"] = None
    elif id_kind == "value":
        message["id"] = draw(json_values)
    body = json.dumps(message).encode()
    if draw(st.integers(0, 19)) == 0:  # invalid UTF-8 somewhere
        at = draw(st.integers(0, 2**20)) % (len(body) + 1)
        body = body[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"])) + body[at:]
    return body


GOOD_HEADERS = [b"Content-Length: %d\r\n\r\n", b"content-length: %d\r\n\r\n",
                b"Content-Length:%d\r\n\r\n", b"Content-Length: %d\n\n",
                b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: %d\r\n\r\n",
                b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n", b"\r\n\r\nContent-Length: %d\r\n\r\n"]
BAD_LENGTHS = [b"-5", b"abc", b"", b"1e3", b"+2", b"0x2", b"5 5", "\uff15".encode(), b"1.0"]


@dataclass
class Case:
    data: bytes
    body: bytes
    """The body as framed (for a short length: its first bytes)."""
    header: str  # good | bad (hides the body) | resync (a bad line, then the frame) | short | garbage
    garbage: bytes = b""
    notes: list[str] = field(default_factory=list)


@st.composite
def cases(draw: st.DrawFn, project: Path) -> Case:
    body = draw(bodies(project))
    n = len(body)
    kind = draw(st.sampled_from(["good"] * 5 + ["bad", "short", "garbage"]))
    if kind == "good":
        header = draw(st.sampled_from(GOOD_HEADERS))
        return Case(header.replace(b"%d", b"%d" % n) + body, body, "good")
    if kind == "short" and n > 1:
        # Positions drawn independently of the body's length (which holds temporary paths):
        # the run stays the same for a seed wherever the test runs.
        cut = 1 + draw(st.integers(0, 2**20)) % (n - 1)  # the body is what the length says
        return Case(b"Content-Length: %d\r\n\r\n" % cut + body, body[:cut], "short")
    if kind == "garbage":
        junk = _ENGTH.sub(b"", draw(st.binary(min_size=1, max_size=300)))  # no Content-Length in it
        return Case(junk + b"Content-Length: %d\r\n\r\n" % n + body, body, "garbage", junk)
    if draw(st.booleans()):  # a broken line before the frame: answered, then read past
        bad = draw(st.sampled_from([
            b"hello\r\n", b"X Y: 1\r\n", b"X: " + b"a" * MAX_HEADER_LINE_BYTES + b"\r\n",
            b"X: y\r\n" * MAX_HEADERS]))
        return Case(bad + b"Content-Length: %d\r\n\r\n" % n + body, body, "resync")
    bad = draw(st.sampled_from([  # a header block that hides the body after it
        b"Content-Length: " + draw(st.sampled_from(BAD_LENGTHS)) + b"\r\n\r\n",
        b"Content-Type: x\r\n\r\n", b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (n, n + 1),
    ]))
    return Case(bad + body, body, "bad")


# -- the oracle -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Expected:
    answered: bool
    id: Any = None
    code: int | None = None  # a required error code, or None: any correct answer
    either_id: bool = False  # the request's id or null (nested too deep to read it surely)
    deep: bool = False  # -32600 or -32700, nothing else


def valid_id(value: Any) -> bool:
    return isinstance(value, str) or isinstance(value, int) and not isinstance(value, bool)


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')


def bracket_depth(body: bytes) -> int:
    """How deep `[` and `{` nest in `body`, outside strings (a parser's stack is not the
    measure: hypothesis raises the recursion limit; the server's threads have their own)."""
    deepest = level = 0
    for byte in _STRING.sub(b"", body):
        if byte in b"[{":
            level += 1
            deepest = max(deepest, level)
        elif byte in b"]}":
            level -= 1
    return deepest


def expect(body: bytes) -> Expected:
    if bracket_depth(body) > MAX_DEPTH:  # too deep: answered -32600 (-32700 if also cut short)
        request = body.startswith(b'{"jsonrpc":"2.0","id":"deep"')
        return Expected(True, "deep" if request else None, None, either_id=request, deep=True)
    try:
        msg = json.loads(body)
    except (ValueError, RecursionError):
        return Expected(True, None, -32700)
    if not isinstance(msg, dict):
        return Expected(True, None, -32600)
    if "method" not in msg:
        if "id" in msg and ("result" in msg or "error" in msg):
            return Expected(False)
        return Expected(True, msg.get("id") if valid_id(msg.get("id")) else None, -32600)
    if "id" not in msg:
        return Expected(False)
    if not valid_id(msg["id"]):
        return Expected(True, None, -32600)
    method, params = msg["method"], msg.get("params")
    if msg.get("jsonrpc") != "2.0" or not isinstance(method, str) or not method:
        return Expected(True, msg["id"], -32600)
    if params is not None and not isinstance(params, dict):
        return Expected(True, msg["id"], -32602)
    if method == "initialize":
        return Expected(True, msg["id"], -32600)  # already initialized
    if method in NOTIFICATION_METHODS:
        return Expected(True, msg["id"], -32601)  # no such request: it is a notification
    if method == "workspace/executeCommand" and (
            params is None or not isinstance(params.get("command"), str)
            or params.get("arguments") is not None and not isinstance(params["arguments"], list)):
        return Expected(True, msg["id"], -32602)
    return Expected(True, msg["id"])


# -- the run ----------------------------------------------------------------------------------------

@dataclass
class Tally:
    cases: int = 0
    answered: int = 0
    crashes: int = 0
    hangs: int = 0
    wrong_codes: int = 0
    answered_notifications: int = 0
    examples: list[str] = field(default_factory=list)

    def bad(self, what: str, case: Case, detail: Any) -> None:
        if len(self.examples) < 20:
            self.examples.append(f"{what} [{case.header}]: {case.data[:200]!r} -> {str(detail)[:300]}")


def code_of(answer: dict[str, Any]) -> int | None:
    return answer["error"].get("code") if isinstance(answer.get("error"), dict) else None


def run_case(server: FuzzServer, case: Case, tally: Tally) -> None:
    tally.cases += 1
    expected = expect(case.body) if case.header != "bad" else Expected(False)
    server.send(case.data)
    probe = f"probe-{tally.cases}"
    if server.request(probe, "talaria/probe", {}, HANG_S) is None:
        tally.hangs += 1
        tally.bad("hang" if server.alive() else "crash", case, "the probe got no answer")
    nulls = server.null_answers()
    own = 0 if case.header == "short" else -1  # the body's id-null answer: before or after the
    # framing one (a short length's rest is read after its body; garbage before the frame)
    if expected.answered and expected.id is not None:
        answer = server.answer(expected.id, HANG_S)
        if answer is None and expected.either_id and nulls:
            answer = nulls.pop(own)
        if answer is None:
            tally.hangs += 1
            tally.bad("hang" if server.alive() else "crash", case, "no answer")
        else:
            tally.answered += 1
            check_code(tally, case, expected, answer)
    elif expected.answered:  # id null
        if nulls:
            tally.answered += 1
            check_code(tally, case, expected, nulls.pop(own))
        else:
            tally.wrong_codes += 1
            tally.bad("no id-null answer", case, expected)
    broken = {"bad": (1, 1), "resync": (1, 1), "short": (0, 1), "garbage": (0, 1),
              "good": (0, 0)}[case.header]
    if not broken[0] <= len(nulls) <= broken[1] or any(code_of(n) not in (-32700, -32600) for n in nulls):
        tally.wrong_codes += 1
        tally.bad("framing answers", case, nulls)
    if stray := server.unclaimed():
        tally.answered_notifications += len(stray)
        tally.bad("answered a notification, a broken frame's body, or twice", case, stray)
    if not server.alive():
        tally.crashes += 1
        tally.bad("crash", case, bytes(server.stderr[-500:]).decode(errors="replace"))
        server.restart()
        setup(server)


def check_code(tally: Tally, case: Case, expected: Expected, answer: dict[str, Any]) -> None:
    code = code_of(answer)
    if "error" in answer and (code not in CODES or expected.code not in (None, code)):
        tally.wrong_codes += 1
        tally.bad("wrong code", case, answer["error"])
    elif expected.deep and code not in (-32600, -32700):
        tally.wrong_codes += 1
        tally.bad("too deep, not refused", case, answer)
    elif expected.code is not None and code is None:
        tally.wrong_codes += 1
        tally.bad("should have failed", case, answer)
    elif "traceback" in json.dumps(answer).lower():
        tally.wrong_codes += 1
        tally.bad("a traceback in an answer", case, answer)


def setup(server: FuzzServer) -> None:
    root = f"file://{server.project}"
    init = server.request("setup", "initialize", {"processId": None, "rootUri": root,
                                                  "capabilities": {}}, HANG_S)
    assert init is not None and "result" in init, init
    server.send(b'Content-Length: 52\r\n\r\n{"jsonrpc":"2.0","method":"initialized","params":{}}')


def fuzz(tmp_path: Path, llm: Any, examples: int, capsys: pytest.CaptureFixture[str]) -> None:
    llm.default_turn = {"text": "ok"}
    server = FuzzServer(tmp_path, llm)
    (server.project / "a.py").write_text("x = 1\ny = 2\n")
    (server.project / "dir").mkdir()
    os.mkfifo(server.project / "fifo")
    tally = Tally()
    try:
        setup(server)

        @seed(SEED)
        @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
                  suppress_health_check=list(HealthCheck))
        @given(case=cases(server.project))
        def one(case: Case) -> None:
            run_case(server, case, tally)

        one()
    finally:
        server.close()
    report = {"lsp_fuzz_cases": tally.cases, "answered": tally.answered, "crashes": tally.crashes,
              "hangs": tally.hangs, "wrong_codes": tally.wrong_codes,
              "answered_notifications": tally.answered_notifications,
              "stdout_problems": len(server.problems), "seed": SEED}
    with capsys.disabled():
        print("\n" + json.dumps(report))
    problems = tally.examples + server.problems[:20]
    assert not problems, json.dumps(report) + "\n" + "\n".join(problems)
    assert tally.cases >= examples * 0.9  # hypothesis ran (nearly) all it was asked for


def test_lsp_protocol_fuzz(tmp_path: Path, fake_llm: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fuzz(tmp_path, fake_llm, CI_CASES, capsys)


@pytest.mark.deep
def test_lsp_protocol_fuzz_big_run(tmp_path: Path, fake_llm: Any,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    fuzz(tmp_path, fake_llm, DEEP_CASES, capsys)
