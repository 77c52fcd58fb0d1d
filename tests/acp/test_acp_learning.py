"""Self-improvement through a real `talaria acp` (fake model at HTTP only): the background
review runs after the prompt's answer, never before it or in the way of the next prompt; what it
saves reaches the editor as a notice and as a new slash command, which loads the skill."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.acp_harness import Editor
from tests.fakellm import FakeLLM
from tests.tools.skills.helpers import skill_md

SKILL = skill_md("fix-flaky-pytest", "Fix flaky pytest tests by pinning seeds",
                 "# Steps\n1. Run pytest -p no:randomly.\n2. Pin the seed.\n")
TODO = {"name": "todo", "arguments": {"todos": [{"id": "1", "content": "fix it"}]}}
WORK = [{"tool_calls": [TODO, TODO]}, {"text": "Fixed."}]
ENV = {"TALARIA_SKILL_REVIEW_INTERVAL": "2"}


def texts(ed: Editor, sid: str) -> str:
    return "".join(u["content"].get("text", "") for u in ed.updates(sid, "agent_message_chunk"))


def index(transcript: list[tuple[str, dict[str, Any]]], match: Any) -> int:
    return next(i for i, (_, m) in enumerate(transcript) if match(m))


def test_the_answer_and_the_next_prompt_never_wait_for_the_review(tmp_path: Path) -> None:
    with FakeLLM(stall_seconds=120) as llm:
        # The review's model call hangs: the turn must not care.
        llm.script([*WORK, {"fault": "stall", "after_chunks": 0}, {"text": "Second answer."}])
        with Editor(tmp_path, llm, env=ENV) as ed:
            ed.initialize()
            sid = ed.new_session()
            assert ed.prompt(sid, "fix the flaky test")["stopReason"] == "end_turn"
            ed.wait_for(lambda: len(llm.requests) == 3, what="the review's model call")
            assert "Background review" in str(llm.requests[2]["json"]["messages"][-1]["content"])
            assert ed.prompt(sid, "and now?")["stopReason"] == "end_turn"  # while it hangs
            assert "Second answer." in texts(ed, sid)
            ed.request("session/close", {"sessionId": sid})  # cancels the review cleanly
            ed.sync()
            assert "Saved" not in texts(ed, sid) and "Traceback" not in ed.stderr.decode()


def test_a_saved_skill_is_announced_offered_as_a_command_and_loads(tmp_path: Path) -> None:
    with FakeLLM() as llm:
        create = {"name": "skill_manage", "arguments": {"action": "create", "name": "fix-flaky-pytest",
                                                        "content": SKILL}}
        llm.script([*WORK, {"tool_calls": [create]}, {"text": "Saved."}, {"text": "Applied."}])
        with Editor(tmp_path, llm, env=ENV) as ed:
            ed.initialize()
            sid = ed.new_session()
            request_id = ed.send_prompt(sid, "fix the flaky test")
            assert ed.result(request_id)["stopReason"] == "end_turn"

            def offered() -> bool:
                return any("fix-flaky-pytest" in {c["name"] for c in u["availableCommands"]}
                           for u in ed.updates(sid, "available_commands_update"))
            ed.wait_for(offered, what="the skill as a slash command")
            ed.wait_for(lambda: "Saved skill `fix-flaky-pytest`" in texts(ed, sid), what="notice")
            transcript = ed.transcript()
            answered = index(transcript, lambda m: m.get("id") == request_id and "result" in m)
            noticed = index(transcript, lambda m: "Saved skill" in str(m.get("params", {})))
            assert answered < noticed
            assert (ed.home / "skills/fix-flaky-pytest/SKILL.md").is_file()

            assert ed.prompt(sid, "/fix-flaky-pytest on tests/test_a.py")["stopReason"] == "end_turn"
            sent = str(llm.requests[-1]["json"]["messages"][-1]["content"])
            assert "Pin the seed." in sent and "on tests/test_a.py" in sent
            assert ed.prompt(sid, "/skills")["stopReason"] == "end_turn"
            assert "/fix-flaky-pytest — Fix flaky pytest tests by pinning seeds (user; used 1×)" in texts(ed, sid)


def test_a_huge_hand_written_skill_is_cut_when_invoked(tmp_path: Path) -> None:
    from talaria.agent.skills.commands import INVOKED_MAX

    folder = tmp_path / "home/skills/giant"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(skill_md("giant", "A very long skill", "x" * (INVOKED_MAX * 2)))
    with FakeLLM() as llm, Editor(tmp_path, llm) as ed:
        ed.initialize()
        sid = ed.new_session()
        commands = ed.wait_for(lambda: ed.updates(sid, "available_commands_update"), what="commands")
        assert "giant" in {c["name"] for c in commands[0]["availableCommands"]}
        assert ed.prompt(sid, "/giant")["stopReason"] == "end_turn"
        sent = llm.requests[-1]["json"]["messages"][-1]["content"]
        loaded = sent if isinstance(sent, str) else " ".join(p.get("text", "") for p in sent)
        assert INVOKED_MAX < len(loaded) < INVOKED_MAX + 1_000 and "more characters: skill_view" in loaded
        assert "Apply the skill `giant` here." in loaded
