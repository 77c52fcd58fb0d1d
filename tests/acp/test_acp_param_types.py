"""Every ACP method of a real `talaria acp` with params of the schema's shapes and wrong types
(issue 23 item 8), and the editor's answers to the agent's requests with wrong shapes.

The params are generated from the official schema's fields (`schema_types`, not the agent's
own tables): for each method, a base that gets far into its handler (a real session id, a real
cwd), then fields dropped, or replaced with nulls, arrays, objects nested three deep, huge
numbers, booleans, strings. An oracle that reads the schema says what each must get:

    a request with a field of the wrong type       -32602 naming that field
      (or a required one missing)
    a request whose fields have the right types    a result or any error but -32603
    a notification (session/cancel, $/cancel_request)   no answer
    any of them                                    no ERROR line and no traceback, in stderr
                                                   or in the log file; the agent stays up
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from talaria.acp_server.params import PARAMS, RESULTS
from tests.acp.fuzz_agent import NULL, FuzzAgent
from tests.acp.schema_types import fields, fits, params_kind
from tests.acp.test_params_shapes import LIBERAL

SEED = 20261201
CASES = int(os.environ.get("TALARIA_PARAM_CASES", "250"))
ANSWER_CASES = int(os.environ.get("TALARIA_ANSWER_CASES", "25"))
HANG_S = 20.0
"""Seconds an answer may take before the case counts as a hang (the fake LLM is instant)."""
NOTIFICATIONS = {"session/cancel", "$/cancel_request"}
METHODS = sorted(PARAMS)

WRONG: list[Any] = [None, [], [1], ["x"], [{}], [None, 2**70], {}, {"a": {"b": [1, {"c": None}]}},
                    2**70, -(2**70), 2**63, 2**64, 65536, -1, 0, 1.5, -0.0, True, False, "", "x",
                    "x" * 3000, "\x00", "/", "relative/dir"]
text = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
json_values = st.recursive(st.none() | st.booleans() | st.integers(-(2**70), 2**70)
                           | st.floats(allow_nan=False, allow_infinity=False) | text,
                           lambda kids: st.lists(kids, max_size=3)
                           | st.dictionaries(text, kids, max_size=3), max_leaves=8)


@dataclass
class Ids:
    session: str
    project: str


def base(method: str, ids: Ids) -> dict[str, Any]:
    """Params that get far into `method`'s handler."""
    opening = {"cwd": ids.project, "mcpServers": []}
    return {
        "initialize": {"protocolVersion": 1, "clientCapabilities": {}},
        "authenticate": {"methodId": "setup"},
        "session/new": opening,
        "session/load": {"sessionId": ids.session, **opening},
        "session/resume": {"sessionId": ids.session, **opening},
        "session/fork": {"sessionId": ids.session, **opening},
        "session/prompt": {"sessionId": ids.session, "prompt": [{"type": "text", "text": "hi"}]},
        "session/set_mode": {"sessionId": ids.session, "modeId": "default"},
        "session/set_config_option": {"sessionId": ids.session, "configId": "mode",
                                      "value": "default"},
        "$/cancel_request": {"requestId": 1},
    }.get(method, {"sessionId": ids.session} if "sessionId" in PARAMS[method] else {})


@st.composite
def params_of(draw: st.DrawFn, method: str, ids: Ids) -> dict[str, Any]:
    params = dict(base(method, ids))
    for name in fields(method, params_kind(method)):
        action = draw(st.sampled_from(["keep", "keep", "keep", "drop", "wrong", "wrong", "any"]))
        if action == "drop":
            params.pop(name, None)
        elif action == "wrong":
            params[name] = draw(st.sampled_from(WRONG))
        elif action == "any":
            params[name] = draw(json_values)
    if draw(st.integers(0, 4)) == 0:
        params.update(draw(st.dictionaries(text, json_values, max_size=2)))
    return params


def wrong_fields(method: str, params: dict[str, Any]) -> list[str]:
    """What the schema says is wrong: a non-lenient field of the wrong type, a required one
    missing (but for the ones the agent takes liberally)."""
    wrong = []
    for name, spec in fields(method, params_kind(method)).items():
        if name in params:
            if not spec.lenient and not fits(params[name], spec):
                wrong.append(name)
        elif spec.required and (method, name) not in LIBERAL:
            wrong.append(name)
    return wrong


STDERR_PATIENCE_S = 20
"""How long a warning line may take to reach the test's stderr reader (a loaded machine)."""


def setup(agent: FuzzAgent) -> Ids:
    agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}}, "init")
    new = agent.request("session/new", {"cwd": str(agent.project), "mcpServers": []}, "new")
    return Ids(new["result"]["sessionId"], str(agent.project))


def no_answer_to_notification(agent: FuzzAgent, count: int) -> list[Any]:
    """A round trip, then the answers nobody asked for."""
    agent.request("session/list", {}, f"sentinel-{count}")
    return agent.unclaimed()


def test_the_issue_s_line_is_dropped_without_an_error(tmp_path: Path, fake_llm: Any) -> None:
    fake_llm.default_turn = {"text": "ok"}
    agent = FuzzAgent(tmp_path, fake_llm)
    try:
        setup(agent)
        agent.send(b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":[1]}}')
        assert no_answer_to_notification(agent, 0) == []
        assert agent.alive() and agent.log_problems() == []
        warning = ("ignoring notification 'session/cancel': `sessionId` must be a string, not "
                   "an array")
        # stderr is read by a thread of the test's: the line may come after the sentinel's answer.
        deadline = time.monotonic() + STDERR_PATIENCE_S
        while warning not in bytes(agent.stderr).decode() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert warning in bytes(agent.stderr).decode()
    finally:
        agent.close()


def test_every_method_with_params_of_wrong_types(tmp_path: Path, fake_llm: Any) -> None:
    fake_llm.default_turn = {"text": "ok"}
    agent = FuzzAgent(tmp_path, fake_llm)
    bad: list[str] = []
    counts = {"cases": 0, "requests": 0, "invalid_params": 0, "results": 0, "logged": 0}
    try:
        ids = setup(agent)

        @seed(SEED)
        @settings(max_examples=CASES, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(data=st.data())
        def one(data: Any) -> None:
            counts["cases"] += 1
            n = counts["cases"]
            method = data.draw(st.sampled_from(METHODS))
            params = data.draw(params_of(method, ids))
            wrong = wrong_fields(method, params)
            line = json.dumps({"jsonrpc": "2.0", "method": method, "params": params} if method
                              in NOTIFICATIONS else {"jsonrpc": "2.0", "id": n, "method": method,
                                                     "params": params}).encode()
            agent.send(line, method, NULL if method in NOTIFICATIONS else n)
            if method in NOTIFICATIONS:
                if stray := no_answer_to_notification(agent, n):
                    bad.append(f"answered a notification: {line[:300]!r} -> {stray}")
            else:
                counts["requests"] += 1
                answer = agent.answer(n, HANG_S)
                error = (answer or {}).get("error") or {}
                if answer is None:
                    bad.append(f"{'hang' if agent.alive() else 'crash'}: {line[:300]!r}")
                elif error.get("code") == -32603 or "Traceback" in json.dumps(answer):
                    bad.append(f"internal error: {line[:300]!r} -> {error}")
                elif wrong and (error.get("code") != -32602 or not any(
                        f"`{name}" in str(error.get("data")) for name in wrong)):
                    bad.append(f"{wrong} are wrong, not said: {line[:300]!r} -> {answer}")
                counts["invalid_params"] += error.get("code") == -32602
                counts["results"] += "result" in (answer or {})
                if "result" in (answer or {}) and method in ("session/close", "session/delete"):
                    ids.session = setup(agent).session  # the base session is gone: a new one
            if len(problems := agent.log_problems()) > counts["logged"]:
                bad.append(f"logged: {line[:300]!r} -> {problems[counts['logged']:][:3]}")
                counts["logged"] = len(problems)
            if not agent.alive():
                bad.append(f"crash: {line[:300]!r}: {bytes(agent.stderr[-500:])!r}")
                agent.restart()
                ids.session = setup(agent).session

        one()
    finally:
        agent.close()
    print(json.dumps({**counts, "bad": len(bad), "schema_problems": len(agent.problems)}))
    assert not bad and not agent.problems, "\n".join(bad[:20] + agent.problems[:10])
    # The oracle was exercised both ways: some requests failed on types, some went through.
    assert counts["invalid_params"] and counts["results"], counts


# -- the editor's answers -------------------------------------------------------------------------

GOOD_ANSWERS: dict[str, Any] = {
    "fs/read_text_file": {"content": "hello\n"},
    "fs/write_text_file": {},
    "terminal/create": {"terminalId": "term-1"},
    "terminal/output": {"output": "hi\n", "truncated": False, "exitStatus": {"exitCode": 0}},
    "terminal/wait_for_exit": {"exitCode": 0, "signal": None},
    "terminal/kill": {},
    "terminal/release": {},
    "session/request_permission": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
    "elicitation/create": {"action": "accept", "content": {"answer": "yes"}},
}
TOOL_CALLS = [{"name": "read_file", "arguments": {"path": "a.txt"}},
              {"name": "write_file", "arguments": {"path": "b.txt", "content": "b"}},
              {"name": "terminal", "arguments": {"command": "echo hi"}},
              {"name": "clarify", "arguments": {"question": "Which?", "choices": ["x", "y"]}}]


NESTED = {"session/request_permission": ("outcome", ["outcome", "optionId"]),
          "terminal/output": ("exitStatus", ["exitCode", "signal"]),
          "elicitation/create": ("content", ["answer", "other"])}
KNOWN_ANSWERS: list[dict[str, Any]] = [  # each once before the generated ones
    {"fs/read_text_file": {"result": []}},
    {"fs/read_text_file": {"result": {"content": 5}}},
    {"terminal/create": {"result": {"terminalId": ["t"]}}},
    {"terminal/output": {"result": {"output": 5, "truncated": "x"}}},
    {"terminal/output": {"result": {"output": "x", "exitStatus": [1]}}},
    {"terminal/wait_for_exit": {"result": {"exitCode": "x"}}},
    {"terminal/wait_for_exit": {"result": []}},
    {"session/request_permission": {"result": {"outcome": {"outcome": "selected",
                                                           "optionId": [1]}}}},
    {"session/request_permission": {"result": {"outcome": []}}},
    {"elicitation/create": {"result": {"action": {}}}},
    {"elicitation/create": {"result": {"action": "accept", "content": []}}},
    {"fs/write_text_file": {}},
]


@st.composite
def answer_of(draw: st.DrawFn, method: str) -> dict[str, Any]:
    """The fields of a response line to `method` but its id, wrongly shaped."""
    shape = draw(st.sampled_from(["fields", "fields", "nested", "nested", "result", "neither",
                                  "error", "both"]))
    good = GOOD_ANSWERS[method]
    if shape == "result":
        return {"result": draw(st.sampled_from(WRONG) | json_values)}
    if shape == "neither":
        return {}
    if shape == "error":
        return {"error": draw(st.sampled_from([{"code": "x"}, {"code": -32000}, [], None, 5,
                                               {"code": 1.5, "message": []}]))}
    if shape == "both":
        return {"result": good, "error": {"code": -32000, "message": "both"}}
    result: dict[str, Any] = json.loads(json.dumps(good))
    if shape == "nested" and method in NESTED:
        name, keys = NESTED[method]
        inner = result.get(name) if isinstance(result.get(name), dict) else {}
        result[name] = {**inner, draw(st.sampled_from(keys)): draw(st.sampled_from(WRONG))}
        return {"result": result}
    for name in RESULTS[method]:
        action = draw(st.sampled_from(["keep", "drop", "wrong", "wrong"]))
        if action == "drop":
            result.pop(name, None)
        elif action == "wrong":
            result[name] = draw(st.sampled_from(WRONG) | json_values)
    return {"result": result}


def test_editor_answers_of_wrong_shapes_do_not_break_a_turn(tmp_path: Path, fake_llm: Any) -> None:
    agent = FuzzAgent(tmp_path, fake_llm)
    (agent.project / "a.txt").write_text("on disk\n")
    bad: list[str] = []
    counts = {"turns": 0, "ended": 0, "logged": 0}
    try:
        caps = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True,
                "elicitation": {"form": {}}}
        agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": caps}, "init")

        def turn(wrong: dict[str, Any]) -> None:
            """One prompt whose tools meet the editor's answers, `wrong` ones for some methods."""
            counts["turns"] += 1
            n = counts["turns"]
            answers = {m: wrong.get(m, {"result": GOOD_ANSWERS[m]}) for m in GOOD_ANSWERS}
            for method, fields_ in answers.items():
                agent.replies[method] = lambda msg, f=fields_: json.dumps(
                    {"jsonrpc": "2.0", "id": msg["id"], **f}).encode()
            fake_llm.script([{"tool_calls": TOOL_CALLS}, {"text": "done"}])
            fake_llm.default_turn = {"text": "ok"}
            new = agent.request("session/new", {"cwd": str(agent.project), "mcpServers": []},
                                f"new-{n}")
            session = new["result"]["sessionId"]
            agent.send(json.dumps({"jsonrpc": "2.0", "id": f"p-{n}", "method": "session/prompt",
                                   "params": {"sessionId": session, "prompt": [
                                       {"type": "text", "text": "go"}]}}).encode(),
                       "session/prompt", f"p-{n}")
            answer = agent.answer(f"p-{n}", HANG_S)
            if answer is None:
                bad.append(f"no answer to the prompt with {wrong}")
            elif "result" not in answer:
                bad.append(f"the prompt failed: {answer['error']} with {wrong}")
            else:
                counts["ended"] += 1
            if len(problems := agent.log_problems()) > counts["logged"]:
                bad.append(f"logged {problems[counts['logged']:][:3]} with {wrong}")
                counts["logged"] = len(problems)
            agent.request("session/close", {"sessionId": session}, f"close-{n}")
            if not agent.alive():
                bad.append(f"crash with {wrong}: {bytes(agent.stderr[-500:])!r}")
                agent.restart()
                agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": caps},
                              f"init-{n}")

        for wrong in KNOWN_ANSWERS:
            turn(wrong)

        @seed(SEED)
        @settings(max_examples=ANSWER_CASES, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(data=st.data())
        def one(data: Any) -> None:
            methods = data.draw(st.lists(st.sampled_from(sorted(GOOD_ANSWERS)), min_size=1,
                                         max_size=2, unique=True))
            turn({m: data.draw(answer_of(m)) for m in methods})

        one()
    finally:
        agent.close()
    print(json.dumps({**counts, "bad": len(bad), "schema_problems": len(agent.problems)}))
    assert not bad and not agent.problems, "\n".join(bad[:10] + agent.problems[:10])
