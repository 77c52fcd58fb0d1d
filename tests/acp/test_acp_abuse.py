"""Protocol abuse: garbage, wrong types, unknown methods, huge lines, EOF mid-turn, stray output.

The server must answer each with the right JSON-RPC error (a short reason, never a traceback
or a path of the agent's own install), keep serving, and keep stdout pure protocol.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
import time
from pathlib import Path

from tests.acp_harness import ROOT, SERVER_CMD, Editor, server_env
from tests.helpers import group_alive

HUGE_PROMPT_BYTES = 50 * 1024 * 1024


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def assert_clean_reason(error: dict, code: int) -> None:
    assert error["code"] == code, error
    reason = json.dumps(error.get("data"))
    assert error.get("data"), f"no reason given: {error}"
    assert "Traceback" not in reason and str(ROOT) not in reason and "site-packages" not in reason, reason


def test_garbage_lines_get_parse_errors_and_the_server_keeps_serving(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        for junk in (b"this is not json", b"{\"jsonrpc\": \"2.0\", ", b"\xff\xfe\x00garbage", b"[1, 2"):
            ed.send_raw(junk)
        ed.send_raw(b"")  # blank lines are skipped silently
        ed.send_raw(b"[]")
        ed.send_raw(b"42")
        assert ed.initialize()["protocolVersion"] == 1
        errors = [m["error"] for d, m in ed.transcript() if "error" in m]
    assert [e["code"] for e in errors] == [-32700] * 4 + [-32600, -32600]
    for error in errors:
        assert error.get("data") and "Traceback" not in json.dumps(error)


def test_wrong_types_are_invalid_params_with_a_reason(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        project = str(ed.project)
        bad = [
            ("initialize", {"protocolVersion": "1"}),
            ("initialize", {"protocolVersion": True}),
            ("authenticate", {"methodId": 7}),
            ("authenticate", {"methodId": "no-such-method"}),
            ("session/new", {"cwd": 123, "mcpServers": []}),
            ("session/new", {"mcpServers": []}),
            ("session/new", {"cwd": project + "/\x00bad", "mcpServers": []}),
            ("session/load", {"sessionId": sid, "cwd": ["x"], "mcpServers": []}),
            ("session/prompt", {"sessionId": sid, "prompt": "just a string"}),
            ("session/prompt", {"sessionId": sid, "prompt": []}),
            ("session/prompt", {"sessionId": sid, "prompt": [{"type": 5}]}),
            ("session/prompt", {"sessionId": sid, "prompt": [{"type": "video", "url": "x"}]}),
            ("session/prompt", {"sessionId": sid, "prompt": [{"type": "image", "data": 1, "mimeType": "image/png"}]}),
            ("session/prompt", {"sessionId": sid, "prompt": [{"type": "resource", "resource": "oops"}]}),
            ("session/prompt", {"sessionId": sid, "prompt": [{"type": "resource_link", "uri": 5}]}),
            ("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": ["x"]}]}),
            ("session/prompt", {"sessionId": 42, "prompt": [{"type": "text", "text": "hi"}]}),
            ("session/set_mode", {"sessionId": sid, "modeId": 3}),
            ("session/set_config_option", {"sessionId": sid, "configId": "mode", "value": True}),
            ("session/set_config_option", {"sessionId": sid, "configId": ["mode"], "value": "plan"}),
            ("session/list", {"cwd": 5}),
            ("session/list", {"cursor": "nan"}),
            ("session/close", {"sessionId": None}),
        ]
        ids = [ed.send_raw({"jsonrpc": "2.0", "id": f"bad-{i}", "method": m, "params": p})
               for i, (m, p) in enumerate(bad)]
        ids.append(ed.send_raw({"jsonrpc": "2.0", "id": "bad-array", "method": "session/list", "params": [1]}))
        responses = [ed.response(i) for i in ids]
        # Still serving, and the session is unharmed.
        assert ed.prompt(sid, "still fine?")["stopReason"] == "end_turn"
    for (method, params), response in zip([*bad, ("session/list", [1])], responses, strict=True):
        assert "error" in response, (method, params, response)
        assert_clean_reason(response["error"], -32602)


def test_unknown_methods_and_notifications(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        fly = ed.send_raw({"jsonrpc": "2.0", "id": "fly", "method": "session/fly", "params": {}})
        assert ed.response(fly)["error"]["code"] == -32601
        assert ed.error("_talaria/nothing", {}).code == -32601
        ed.notify("_talaria/ignored", {})  # unknown notifications are ignored, not answered
        ed.send_raw({"jsonrpc": "2.0", "method": "no/such/notification", "params": {}})
        bad_id = ed.send_raw({"jsonrpc": "2.0", "id": "x", "method": 5, "params": {}})
        assert ed.response(bad_id)["error"]["code"] == -32600
        ed.sync()
        answered = [m for d, m in ed.transcript() if "id" in m and m["id"] is None]
    assert not answered


def test_a_50_mb_prompt_line_is_handled(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        huge = "x" * HUGE_PROMPT_BYTES
        msg = {"jsonrpc": "2.0", "id": "huge", "method": "session/prompt",
               "params": {"sessionId": sid, "prompt": [{"type": "text", "text": huge}]}}
        started = time.monotonic()
        ed.send_raw(msg)
        response = ed.response("huge", timeout=30)
        took = time.monotonic() - started
        assert ed.prompt(sid, "small one")["stopReason"] == "end_turn"
    # No model's context window holds 50 MB: refused at once, with the reason.
    assert_clean_reason(response["error"], -32602)
    assert "too large" in response["error"]["data"]
    assert took < 10


def test_closing_stdin_mid_turn_exits_cleanly_and_kills_children(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"tool_calls": [call("terminal", command="echo $$ > pid.txt; sleep 30")]}])
    ed = Editor(tmp_path, fake_llm)
    ed.initialize(terminal=False)
    sid = ed.new_session()
    ed.send_prompt(sid, "run")
    pid_file = ed.project / "pid.txt"
    ed.wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), what="the command")
    started = time.monotonic()
    code = ed.close(check=False)
    took = time.monotonic() - started
    alive = group_alive(int(pid_file.read_text()))
    ed.check()
    assert code == 0 and took < 8
    assert not alive


def test_closing_stdin_while_a_permission_request_waits_exits_at_once(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"tool_calls": [call("write_file", path="a.txt", content="a")]}])
    ed = Editor(tmp_path, fake_llm, permission=None, answer_cancelled=False)
    ed.initialize()
    sid = ed.new_session()
    ed.send_prompt(sid, "write")
    ed.wait_for(lambda: ed.permission_requests, what="the permission request")
    started = time.monotonic()
    assert ed.close() == 0
    assert time.monotonic() - started < 5 and not (ed.project / "a.txt").exists()
    assert len(fake_llm.requests) == 1  # nobody is listening: the turn stops, no more model calls


def test_provider_errors_are_clean_rpc_errors(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([{"fault": {"status": 401}}, {"fault": {"status": 400, "message": "bad tool schema"}}])
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        auth = ed.response(ed.send_prompt(sid, "one"))["error"]
        bad = ed.response(ed.send_prompt(sid, "two"))["error"]
        assert ed.prompt(sid, "three")["stopReason"] == "end_turn"  # the session survives
    assert_clean_reason(auth, -32000)
    assert "authentication failed" in auth["message"] and auth["data"]["cause"] == "auth"
    assert_clean_reason(bad, -32050)  # a model error, not an internal one
    assert "bad tool schema" in bad["message"] and bad["data"]["cause"] == "bad_request"


def test_piped_requests_then_eof_get_their_answers(tmp_path: Path, fake_llm) -> None:
    """`printf '...' | talaria acp`: every request before EOF is answered, then exit 0."""
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(tmp_path), "mcpServers": []}},
    ]
    data = "".join(json.dumps(m) + "\n" for m in lines).encode()
    done = subprocess.run(SERVER_CMD, input=data, capture_output=True, timeout=20, cwd=tmp_path,
                          env=server_env(tmp_path / "home", fake_llm))
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0
    # Requests run concurrently: initialize (which probes the sandbox) may answer second.
    assert sorted(a.get("id") for a in answers if "id" in a) == [1, 2]
    assert all("result" in a for a in answers if "id" in a)


def test_stdout_stays_protocol_when_commands_and_python_code_print(tmp_path: Path, fake_llm) -> None:
    # Python code in the agent's own process printing at run time (after start-up), to sys.stdout
    # and to fd 1 directly, from another thread; and again at exit.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent("""
        import atexit, os, threading, time
        first = os.fstat(1).st_ino
        def noisy():  # once the server has started (fd 1 was swapped), print away
            deadline = time.monotonic() + 10
            while os.fstat(1).st_ino == first and time.monotonic() < deadline:
                time.sleep(0.01)
            print("junk from print", flush=True)
            os.write(1, b"junk on fd 1\\n")
        threading.Thread(target=noisy, daemon=True).start()
        atexit.register(lambda: print("junk at exit"))
    """))
    fake_llm.script([
        {"tool_calls": [call("terminal", command="echo to-stdout; echo to-stderr >&2; printf 'no newline'")]},
        {"text": "done"},
    ])
    env = {"PYTHONPATH": f"{site}:{ROOT}", "TALARIA_LOG_LEVEL": "DEBUG"}
    with Editor(tmp_path, fake_llm, env=env) as ed:
        ed.initialize(terminal=False)
        sid = ed.new_session()
        ed.wait_for(lambda: b"junk on fd 1" in ed.stderr, what="the stray output")
        assert ed.prompt(sid, "print things")["stopReason"] == "end_turn"
        ed.close()
    assert b"junk from print" in ed.stderr and b"junk on fd 1" in ed.stderr
    assert b"junk at exit" in ed.stderr
    assert "to-stdout" in json.dumps(fake_llm.requests[-1]["json"])
