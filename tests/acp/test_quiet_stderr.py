"""stderr is a channel to the person (issue 17): what editors show from it.

Emacs' agent-shell turns every stderr chunk into an error notice, Zed shows it in its agent log.
At the default level a normal session writes nothing there (INFO, httpx's per-request lines and
the sandbox tier go to `$TALARIA_HOME/logs/` only); a warning is one line saying what to do;
`TALARIA_LOG_LEVEL` brings the detail back for debugging. Protocol errors name what they are
about, in the message and in `data`, and carry no path the client did not send.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.acp_checks import check_turn
from tests.acp_harness import AGENT_TO_CLIENT, SERVER_CMD, Editor

BIG = "".join(f"line {i}: the ledger entry {i} balances to zero\n" for i in range(400))


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def test_a_whole_session_leaves_stderr_empty_at_the_default_level(tmp_path: Path, fake_llm) -> None:
    env = {"TALARIA_CONTEXT_WINDOW": "30000"}
    with Editor(tmp_path, fake_llm, env=env) as ed:
        (ed.project / "old.py").write_text("x = 1\n")
        for i in range(3):
            (ed.project / f"big{i}.txt").write_text(BIG)
        ed.initialize()
        sid = ed.new_session()
        # An edit scenario: read, edit, a command in the editor's terminal, a plan.
        fake_llm.script([
            {"tool_calls": [call("read_file", path="old.py")]},
            {"tool_calls": [call("patch", path="old.py", old_string="x = 1", new_string="x = 2")]},
            {"tool_calls": [call("terminal", command="echo built")]},
            {"tool_calls": [call("todo", todos=[{"id": "1", "content": "edit", "status": "completed"}])]},
            {"text": "Edited."},
        ])
        prompt_id = ed.send_prompt(sid, "edit old.py")
        assert ed.result(prompt_id)["stopReason"] == "end_turn"
        check_turn(ed, sid, prompt_id)
        # An execute_code turn: a sandboxed script calling a tool back through the editor.
        fake_llm.script([
            {"tool_calls": [call("execute_code", code="from hermes_tools import read_file\n"
                                 "print(read_file('old.py')['content'][:40])")]},
            {"text": "Ran it."},
        ])
        assert ed.prompt(sid, "run a script", timeout=60)["stopReason"] == "end_turn"
        tool_result = fake_llm.requests[-1]["json"]["messages"][-1]
        assert tool_result["role"] == "tool" and "x = 2" in tool_result["content"]  # the buffer
        # A cancelled turn, mid-command.
        fake_llm.script([{"tool_calls": [call("terminal", command="sleep 30")]}])
        prompt_id = ed.send_prompt(sid, "wait")
        ed.wait_for(lambda: ed.recorder.messages(AGENT_TO_CLIENT, "terminal/wait_for_exit"),
                    what="the command")
        ed.cancel(sid)
        assert ed.result(prompt_id)["stopReason"] == "cancelled"
        # A compaction, after turns that read big files.
        for i in range(3):
            fake_llm.script([{"tool_calls": [call("read_file", path=f"big{i}.txt")]},
                             {"text": f"Read big{i}."}])
            assert ed.prompt(sid, f"read big{i}.txt")["stopReason"] == "end_turn"
        fake_llm.script([{"text": "## Goal\nread the ledgers"}])
        assert ed.prompt(sid, "/compact")["stopReason"] == "end_turn"
        said = "".join(u["content"]["text"] for u in ed.updates(sid, "agent_message_chunk"))
        assert "Compacted the context" in said
        ed.close()
    assert ed.stderr.decode(errors="replace") == ""
    log = (ed.home / "logs" / "talaria.log").read_text()
    assert "HTTP Request: POST" in log and "sandbox:" in log  # the detail is kept, in the file


def test_the_log_level_brings_the_detail_back_to_stderr(tmp_path: Path, fake_llm) -> None:
    with Editor(tmp_path, fake_llm, env={"TALARIA_LOG_LEVEL": "INFO"}) as ed:
        ed.initialize()
        sid = ed.new_session()
        assert ed.prompt(sid, "hi")["stopReason"] == "end_turn"
        ed.close()
    assert b"HTTP Request: POST" in ed.stderr


def test_a_warning_is_one_line_that_says_what_to_do(tmp_path: Path, fake_llm) -> None:
    # A fallback model whose key is missing: worth telling the person, once.
    env = {"TALARIA_FALLBACK_MODELS": "anthropic:claude-x"}
    with Editor(tmp_path, fake_llm, env=env) as ed:
        ed.initialize()
        ed.new_session()
        ed.close()
    lines = ed.stderr.decode().splitlines()
    assert lines == [lines[0]] * len(lines) and lines, lines  # one line per session, no traceback
    assert lines[0].startswith("talaria: warning: skipping fallback model anthropic:claude-x")
    assert "ANTHROPIC_API_KEY is not set: export it" in lines[0]


def test_protocol_errors_name_what_they_are_about(tmp_path: Path, fake_llm) -> None:
    missing = str(tmp_path / "no" / "such" / "dir")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    with Editor(tmp_path, fake_llm) as ed:
        ed.initialize()
        gone = ed.error("session/new", {"cwd": missing, "mcpServers": []})
        looped = ed.error("session/new", {"cwd": str(loop), "mcpServers": []})
        not_dir = ed.error("session/new", {"cwd": str(a_file), "mcpServers": []})
        unknown = ed.error("session/prompt", {"sessionId": "s-404", "prompt": [{"type": "text", "text": "hi"}]})
        unsaved = ed.error("session/load", {"sessionId": "s-405", "cwd": str(ed.project), "mcpServers": []})
        huge = ed.error("session/set_mode", {"sessionId": "s" * 100_000, "modeId": "plan"})
    assert gone.code == -32002 and missing in gone.message and gone.data["cwd"] == missing
    assert looped.code == -32602 and str(loop) in looped.data and "symbolic links" in looped.data
    assert not_dir.code == -32602 and "not a directory" in not_dir.data
    assert unknown.code == -32002 and "s-404" in unknown.message and unknown.data["sessionId"] == "s-404"
    assert unsaved.code == -32002 and "s-405" in unsaved.message and unsaved.data["sessionId"] == "s-405"
    assert len(huge.message) < 200  # the message quotes a bounded part; data has it all
    everything = json.dumps([e.__dict__ for e in (gone, looped, not_dir, unknown, unsaved)])
    assert str(ed.home) not in everything and "site-packages" not in everything


def test_an_unreadable_cwd_is_named(tmp_path: Path, fake_llm) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0)
    # Root reads every directory: as root, the server runs without the two capabilities
    # that let it (as a root-owned editor launching an agent in a container might).
    command = None
    if os.geteuid() == 0:
        command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--", *SERVER_CMD]
    with Editor(tmp_path, fake_llm, command=command) as ed:
        ed.initialize()
        error = ed.error("session/new", {"cwd": str(locked), "mcpServers": []})
    assert error.code == -32602 and str(locked) in error.data and "cannot be read" in error.data


LOGGING_SCRIPT = """
import logging, sys
from pathlib import Path
from talaria.acp_server.logs import setup_logging
setup_logging(Path(sys.argv[1]), None if sys.argv[2] == "default" else sys.argv[2])
logging.getLogger("httpx").info("HTTP Request: POST http://x")
logging.getLogger("talaria.x").debug("debug detail")
logging.getLogger("talaria.x").warning("first line\\nsecond line")
try:
    1 / 0
except ZeroDivisionError:
    logging.getLogger("talaria.x").exception("it broke")
"""


@pytest.mark.parametrize("level", ["default", "DEBUG"])
def test_logging_levels_and_one_line_stderr(tmp_path: Path, level: str) -> None:
    import subprocess
    import sys

    from tests import ROOT

    done = subprocess.run([sys.executable, "-c", LOGGING_SCRIPT, str(tmp_path), level],
                          capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    log = (tmp_path / "logs" / "talaria.log").read_text()
    assert "HTTP Request: POST" in log and "Traceback" in log and "second line" in log
    if level == "default":
        log_file = tmp_path / "logs" / "talaria.log"
        assert done.stderr.splitlines() == [
            f"talaria: warning: first line (details in {log_file})",
            f"talaria: error: it broke (details in {log_file})",
        ]
        assert "debug detail" not in log
    else:  # asked-for detail: everything, with times and logger names, on both
        assert "HTTP Request: POST" in done.stderr and "debug detail" in done.stderr
        assert "Traceback" in done.stderr and "debug detail" in log
