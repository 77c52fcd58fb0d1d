"""execute_code end to end: a real kernel in the sandbox, tool calls back through the loop."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import anyio

from talaria.agent.loop import run_turn
from talaria.agent.permissions import PermissionAsk
from tests.exec_helpers import configure, execute, output_json
from tests.helpers import assert_pairs_complete, make_session, recorded

SCRIPT = textwrap.dedent("""\
    from hermes_tools import read_file, search_files, patch
    hits = search_files("TODO", file_glob="*.py")["matches"]
    seen = []
    for hit in hits:
        page = read_file(hit["path"], offset=hit["line"], limit=1)
        seen.append(page["content"])
    r = patch("b.py", "# TODO: fix", "return 2")
    print(len(hits), "TODOs;", "patched" if "error" not in r else r["error"])
""")


class Asker:
    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[PermissionAsk] = []

    async def __call__(self, ask: PermissionAsk) -> str:
        self.asked.append(ask)
        return self.answers.pop(0) if self.answers else "allow_once"


def test_script_reads_and_patches_through_the_loop(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path, mode="default")
    session.permissions.asker = asker = Asker()
    (session.cwd / "a.py").write_text("def a():\n    # TODO: later\n    return 1\n")
    (session.cwd / "b.py").write_text("def b():\n    # TODO: fix\n")
    fake_llm.script([
        {"tool_calls": [{"id": "exec_1", "name": "execute_code", "arguments": {"code": SCRIPT}}]},
        {"text": "Patched b.py."},
    ])
    events = recorded(session)
    events.events.clear()  # only what follows
    assert anyio.run(run_turn, session, "fix the TODOs") == "end_turn"

    assert (session.cwd / "b.py").read_text() == "def b():\n    return 2\n"
    started = events.of("ToolCallStarted")
    assert [s.name for s in started] == ["execute_code", "search_files", "read_file", "read_file", "patch"]
    nested_patch = started[-1]
    assert nested_patch.id.startswith("nested_") and nested_patch.kind == "edit"
    assert nested_patch.locations == (str(session.cwd / "b.py"),)
    # Permission: asked for the script (a command) and for its patch, like a direct patch.
    assert [(a.tool_call_id, a.kind, a.reason) for a in asker.asked] == [
        ("exec_1", "execute", "command"), (nested_patch.id, "edit", "edit")]
    finished = {f.id: f for f in events.of("ToolCallFinished")}
    assert set(finished) == {s.id for s in started}
    assert finished[nested_patch.id].content[0]["type"] == "diff"
    assert all(f.status == "completed" for f in finished.values())
    # Only what the script printed reached the model.
    tool_message = next(m for m in fake_llm.requests[1]["json"]["messages"] if m["role"] == "tool")
    result = json.loads(tool_message["content"])
    assert result["output"] == "2 TODOs; patched\n"
    assert result["status"] == "success" and result["tool_calls"] == 4
    assert "TODO: later" not in tool_message["content"]
    assert_pairs_complete(session.messages)


def test_a_rejected_nested_patch_is_a_result_the_script_sees(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path, mode="default")
    session.permissions.asker = Asker("allow_once", "reject_once")
    (session.cwd / "b.py").write_text("x = 1\n")
    result = execute(session, "import json\nfrom hermes_tools import patch\n"
                              "print(json.dumps(patch('b.py', 'x = 1', 'x = 2')))")
    assert output_json(result) == {"error": "The user rejected this tool call.", "rejected": True}
    assert (session.cwd / "b.py").read_text() == "x = 1\n"
    session.permissions.mode = "plan"
    refused = execute(session, "print('never')")
    assert refused["rejected"] and "Plan mode" in refused["error"]


def test_variables_persist_and_reset_starts_fresh(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    first = execute(session, "import json as j\ndata = [1, 2]\nprint('ok')")
    assert first["kernel"] == "new" and first["output"] == "ok\n"
    second = execute(session, "data.append(3)\nprint(j.dumps(data))")
    assert second["output"] == "[1, 2, 3]\n" and "kernel" not in second
    fresh = execute(session, "print('data' in globals())", reset=True)
    assert fresh["output"] == "False\n" and fresh["kernel"] == "new"


def test_script_errors_show_stderr_and_exit_codes(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    failed = execute(session, "print('before')\nraise ValueError('bad input')")
    assert failed["status"] == "error" and failed["exit_code"] == 1
    assert failed["output"] == "before\n"
    assert "line 2" in failed["stderr"] and "raise ValueError('bad input')" in failed["stderr"]
    assert "ValueError: bad input" in failed["error"]
    assert execute(session, "import sys; sys.exit(3)")["exit_code"] == 3
    ok = execute(session, "import sys; print('x'); sys.stderr.write('warn'); sys.exit(0)")
    assert ok["status"] == "success" and "stderr" not in ok  # stderr only when it fails
    died = execute(session, "import os; os._exit(4)")
    assert died["status"] == "interrupted" and died["exit_code"] == 4
    assert "died" in died["error"]
    assert execute(session, "print(1)")["kernel"] == "new"


def test_subprocess_output_is_captured(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    result = execute(session, "import subprocess\nprint('a', flush=True)\n"
                              "subprocess.run(['echo', 'from child'])\nprint('b')")
    assert result["output"] == "a\nfrom child\nb\n"


def test_only_whitelisted_tools_can_be_called(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    events = recorded(session)
    events.events.clear()  # only what follows
    result = execute(session, textwrap.dedent("""\
        import json, hermes_tools
        try:
            from hermes_tools import execute_code
        except ImportError as exc:
            print(exc)
        print(json.dumps([hermes_tools._call("execute_code", {"code": "1"}),
                          hermes_tools._call("todo", {})]))
    """), events)
    lines = result["output"].splitlines()
    assert "execute_code cannot call itself" in lines[0] and "read_file" in lines[0]
    refused = json.loads(lines[1])
    assert all("cannot be called from execute_code" in r["error"] for r in refused)
    assert result["tool_calls"] == 0
    assert [s.name for s in events.of("ToolCallStarted")] == ["execute_code"]


def test_helpers(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    (session.cwd / "f.txt").write_text("x\n")
    result = execute(session, textwrap.dedent("""\
        import json
        from hermes_tools import json_parse, shell_quote, retry, read_file
        calls = []
        def flaky():
            calls.append(1)
            return {"error": "busy"} if len(calls) < 2 else {"ok": True}
        print(json.dumps([json_parse('{"a": "line\\nbreak"}'), json_parse("nope", default=None),
                          shell_quote("it's"), retry(flaky, delay=0), len(calls),
                          retry(read_file, "f.txt")["content"]]))
    """))
    assert output_json(result) == [{"a": "line\nbreak"}, None, "'it'\"'\"'s'", {"ok": True}, 2, "1|x"]


def test_tool_call_limit(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    configure(session, max_tool_calls=3)
    (session.cwd / "f.txt").write_text("x\n")
    events = recorded(session)
    events.events.clear()  # only what follows
    result = execute(session, textwrap.dedent("""\
        import json
        from hermes_tools import read_file
        print(json.dumps([read_file("f.txt").get("error") for _ in range(4)]))
    """), events)
    assert output_json(result)[:3] == [None, None, None]
    assert "tool call limit reached: at most 3" in output_json(result)[3]
    assert result["tool_calls"] == 3
    assert len(events.of("ToolCallStarted")) == 1 + 3


def test_stdout_limit_keeps_head_and_tail_and_saves_the_rest(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    configure(session, stdout_limit=1000)
    result = execute(session, "print(''.join(f'{i:04d}' for i in range(1250)))")  # 5001 bytes
    assert result["stdout_bytes"] == 5001 and result["omitted_bytes"] == 4001
    head, tail = result["output"].split("\n... [4,001 bytes omitted] ...\n")
    assert head == "".join(f"{i:04d}" for i in range(100))  # 40 %
    assert tail.endswith("1249\n") and len(tail) == 600  # 60 %
    saved = Path(result["output_path"])
    assert saved.parent == tmp_path / ".home" / "cache" / "exec"
    assert saved.read_text() == "".join(f"{i:04d}" for i in range(1250)) + "\n"
    small = execute(session, "print('short')")
    assert "output_path" not in small and "omitted_bytes" not in small


def test_stderr_limit(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path)
    configure(session, stderr_limit=100)
    result = execute(session, "import sys\nsys.stderr.write('e' * 1000)\nraise SystemExit(2)")
    assert result["exit_code"] == 2
    assert result["stderr_omitted_bytes"] == 900 and result["stderr"].startswith("e" * 40)
