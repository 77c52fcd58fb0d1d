"""End to end through `talaria acp`: secrets ask whichever tool reaches for them, and a rejected
edit cannot be walked around by commands the user does not see (the editor's terminal runs
them in the sandbox). The issue's examples: the project at $HOME, `.env` after a rejection.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from talaria.tools.sandbox import tiers
from tests.acp.test_acp_permissions import call, launched, run, session, tool_results
from tests.acp_checks import final, text_of_requests
from tests.acp_harness import Editor

KEY = "-----BEGIN OPENSSH PRIVATE KEY----- talaria-test-key"
ENV = "API_TOKEN=talaria-test-token\n"
needs_sandbox = pytest.mark.skipif(tiers.detect_tier() == "rlimits", reason="no sandbox tier here")


def home_project(tmp_path: Path) -> Path:
    """The project is $HOME: ~/.ssh/id_rsa is inside it."""
    home = tmp_path / "project"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(KEY + "\n")
    (home / ".env").write_text(ENV)
    (home / "notes.txt").write_text("the key is in .ssh\n")
    (home / "deploy").mkdir()  # not hidden files: only the secrets filter keeps them out
    (home / "deploy" / "id_ed25519").write_text(KEY + "\n")
    (home / "deploy" / "server.pem").write_text(KEY + "\n")
    return home


SCRIPT = "from hermes_tools import read_file\nprint(read_file('~/.ssh/id_rsa'))"


@pytest.mark.parametrize("mode", ["default", "accept_edits", "plan", "auto"])
def test_secrets_ask_whichever_tool_reads_them(tmp_path: Path, fake_llm, mode: str) -> None:
    project = home_project(tmp_path)
    fake_llm.script([
        {"tool_calls": [call("read_file", path="~/.ssh/id_rsa"), call("read_file", path=".env"),
                        call("search_files", pattern="BEGIN|API_TOKEN", path="~"),
                        call("search_files", pattern="BEGIN", path="~/.ssh")]},
        {"tool_calls": [call("execute_code", code=SCRIPT)]},
        {"text": "ok"},
    ])
    def answer(request: dict) -> str:  # the script itself is allowed; what it reads is not
        return "allow_once" if request["toolCall"]["title"].startswith("Python") else "reject_once"

    with Editor(tmp_path, fake_llm, permission=answer, env={"HOME": str(project)}) as ed:
        sid = session(ed, mode)
        cards = run(ed, sid)
    reasons = [json.dumps(p["toolCall"].get("content")) for p in ed.permission_requests]
    asked = {p["toolCall"]["title"] for p in ed.permission_requests}
    assert {"Read ~/.ssh/id_rsa", "Read .env", "Search 'BEGIN' in ~/.ssh"} <= asked
    assert any("sensitive" in r for r in reasons)
    nested = [c for c in cards.values() if c[0]["toolCallId"].startswith("nested_")]
    if mode != "plan":  # plan refuses execute_code itself
        assert [final(c)["status"] for c in nested] == ["failed"]
        assert any(p["toolCall"]["toolCallId"] == nested[0][0]["toolCallId"] for p in ed.permission_requests)
    broad = next(r for r in tool_results(fake_llm).values() if "sensitive_skipped" in r)
    assert broad["matches"] == [] and broad["sensitive_skipped"] == 2
    seen = text_of_requests(fake_llm)
    assert "talaria-test-key" not in seen and "talaria-test-token" not in seen


def test_dont_ask_refuses_secrets_without_asking(tmp_path: Path, fake_llm) -> None:
    project = home_project(tmp_path)
    fake_llm.script([{"tool_calls": [call("read_file", path="~/.ssh/id_rsa"), call("read_file", path="notes.txt")]},
                     {"text": "ok"}])
    with Editor(tmp_path, fake_llm, env={"HOME": str(project)}) as ed:
        key, notes = run(ed, session(ed, "dont_ask")).values()
    assert not ed.permission_requests
    assert final(key)["status"] == "failed" and final(notes)["status"] == "completed"
    assert "talaria-test-key" not in text_of_requests(fake_llm)


# Commands that change `.env` without naming it (a command naming it asks again, see
# test_acp_permissions), or write outside the project.
WALKAROUNDS = [
    "f=.en; echo X > ${f}v",
    "python3 -c \"open('.e'+'nv','w').write('X')\"",
    "f=.en; cp notes.txt ${f}v",
    "f=.en; ln -sf notes.txt ${f}v",
    "f=.en; mv notes.txt ${f}v",
    "f=.en; rm -f ${f}v",
    "f=.en; sed -i s/talaria/X/ ${f}v",
]


@needs_sandbox
def test_a_rejected_edit_cannot_be_walked_around_by_unseen_commands(tmp_path: Path, fake_llm) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / ".env").write_text(ENV)
    (project / "notes.txt").write_text("notes\n")
    outside = Path("/var/tmp") / f"talaria-walkaround-{tmp_path.name}"
    script = [{"tool_calls": [call("write_file", path=".env", content="X")]}, {"text": "ok"},
              {"tool_calls": [call("terminal", command=c) for c in WALKAROUNDS]
               + [call("terminal", command=f"echo X > {outside}"),
                  call("execute_code", code="open('.e'+'nv', 'w').write('X')")]},
              {"text": "ok"}]
    fake_llm.script(script)
    try:
        with Editor(tmp_path, fake_llm, permission="reject_once") as ed:
            sid = session(ed, "default")
            (write,) = run(ed, sid).values()
            ed.request("session/set_mode", {"sessionId": sid, "modeId": "auto"})
            cards = list(run(ed, sid).values())
        assert len(ed.permission_requests) == 1 and final(write)["status"] == "failed"
        assert (project / ".env").read_text() == ENV and not (project / ".env").is_symlink()
        assert not outside.exists()
        assert len(launched(ed)) == len(WALKAROUNDS) + 1
        assert all(argv[0] != "bash" for argv in launched(ed)), "every one ran in the sandbox"
        results = tool_results(fake_llm)
        failed = [results[c[0]["toolCallId"]] for c in cards if c[0]["toolCallId"] in results]
        assert all("sandbox" in r for r in failed if r.get("exit_code")), failed
    finally:
        outside.unlink(missing_ok=True)
