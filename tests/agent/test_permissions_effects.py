"""Unit level: `Permissions.decide` for input to a live process (`running`), the `notes` kind,
a subagent's permissions following its parent, and a call kind nobody knows.

The same through real tools, processes and sandboxes: test_permission_table.py and
test_permissions_processes.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio

from talaria.agent.permissions import PLAN_NOTES, UNCONFINED, Decision, Permissions
from talaria.tools.registry import NOTES, Running, ToolSpec
from tests.agent.test_permissions import ALLOW, ASK, REFUSE, Asker, perms


def decide(p: Permissions, kind: str, command: str | None = None,
           running: Running | None = None, *paths: Path) -> Decision:
    return anyio.run(lambda: p.decide(tool_call_id="t", tool="process", kind=kind, title="x",
                                      paths=paths, command=command, running=running))


def outcome(p: Permissions, asker: Asker, kind: str, command: str | None = None,
            running: Running | None = None) -> str:
    asked = len(asker.asked)
    decision = decide(p, kind, command, running)
    return ASK if len(asker.asked) > asked else REFUSE if decision.refusal else ALLOW


FREE = Running("proc_1", "sh", confined=False)
BOX = Running("proc_2", "sh", confined=True)


def test_input_to_a_process_is_judged_by_how_it_runs(tmp_path: Path) -> None:
    want = {  # mode: (unconfined, sandboxed)
        "default": (ASK, ASK), "accept_edits": (ASK, ASK), "plan": (REFUSE, REFUSE),
        "auto": (ASK, ALLOW), "dont_ask": (REFUSE, REFUSE), "bypass": (ALLOW, ALLOW)}
    for mode, (free, box) in want.items():
        p, asker = perms(tmp_path, mode, "reject_once")
        assert (outcome(p, asker, "execute", "ls", FREE), outcome(p, asker, "execute", "ls", BOX)) \
            == (free, box), mode
    p, asker = perms(tmp_path, "auto", "reject_once")
    decision = decide(p, "execute", "ls", BOX)
    assert decision == Decision() and decision.sandbox is None  # its own sandbox holds it
    decide(p, "execute", "ls", FREE)
    assert asker.asked[-1].reason == UNCONFINED.format(id="proc_1", command="sh")


def test_allow_always_holds_for_that_input_to_that_process_only(tmp_path: Path) -> None:
    p, asker = perms(tmp_path, "default", "allow_always")
    assert outcome(p, asker, "execute", "make", FREE) == ASK
    p.mode = "dont_ask"
    assert outcome(p, asker, "execute", "make", FREE) == ALLOW  # approved: even unconfined
    assert outcome(p, asker, "execute", "make test", FREE) == REFUSE
    assert outcome(p, asker, "execute", "make", Running("proc_9", "sh", False)) == REFUSE
    assert outcome(p, asker, "execute", "make") == REFUSE  # no terminal `make` was approved
    p.mode = "plan"
    p.remembered[("execute", "make (to proc_1)")] = True
    assert outcome(p, asker, "execute", "make", FREE) == REFUSE  # plan refuses even approved


def test_a_path_rejected_after_a_sandboxed_process_started_makes_its_input_ask(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "late.txt").write_text("x")
    p, asker = perms(tmp_path, "auto", "reject_once")
    started = Running("proc_3", "sh", confined=True, readonly=frozenset({str(project / "old.txt")}))
    p.rejected_paths.add(str(project / "old.txt"))
    p.rejected_paths.add(str(tmp_path / "outside.txt"))  # read-only in any sandbox anyway
    assert outcome(p, asker, "execute", "ls", started) == ALLOW
    p.rejected_paths.add(str(project / "late.txt"))
    assert outcome(p, asker, "execute", "ls", started) == ASK
    assert "rejected after proc_3 started" in asker.asked[-1].reason
    p.rejected_paths.discard(str(project / "late.txt"))
    os.link(project / "late.txt", project / "twin.txt")
    p.rejected_paths.add(str(project / "twin.txt"))
    held = Running("proc_4", "sh", True, frozenset(p.rejected_paths))
    assert outcome(p, asker, "execute", "ls", held) == ASK
    assert "hard link" in asker.asked[-1].reason
    assert outcome(p, asker, "execute", "cat old.txt", started) == ASK  # it names a rejected path


def test_notes_are_refused_in_plan_only(tmp_path: Path) -> None:
    for mode in ("default", "accept_edits", "auto", "dont_ask", "bypass", "plan"):
        p, asker = perms(tmp_path, mode, "reject_once")
        decision = decide(p, NOTES)
        assert not asker.asked
        assert decision.refusal == (PLAN_NOTES if mode == "plan" else None), mode


def test_a_subagent_is_decided_by_its_parent_at_each_call(tmp_path: Path) -> None:
    parent, parent_asker = perms(tmp_path, "default", "allow_once")
    child_asker = Asker("reject_once")
    child = parent.for_subagent(child_asker)
    path = tmp_path / "p" / "a.txt"
    assert outcome(child, child_asker, "edit") == ASK and not parent_asker.asked
    assert decide(child, "edit", None, None, path).refusal == "The user rejected this tool call."
    assert str(path) in parent.rejected_paths  # its answers hold for the parent
    parent.mode = "plan"
    assert decide(child, "read").refusal is None
    assert outcome(child, child_asker, "execute", "ls") == REFUSE
    parent.mode = "auto"
    grandchild = child.for_subagent(Asker())
    assert decide(grandchild, "execute", "ls").sandbox is not None  # auto: sandboxed, unasked
    parent.mode = "bypass"
    assert decide(grandchild, "execute", "ls") == Decision()


def test_a_kind_nobody_knows_is_judged_as_other(tmp_path: Path) -> None:
    async def handler(args: dict[str, object], ctx: object) -> dict[str, object]:
        return {}

    spec = ToolSpec("odd", "odd", {"type": "object"}, handler, kind="read",
                    kind_of=lambda args: "teleport")
    assert spec.call_kind({}) == "other" and spec.card_kind({}) == "other"
    notes = ToolSpec("n", "n", {"type": "object"}, handler, kind="think", kind_of=lambda a: NOTES)
    assert (notes.call_kind({}), notes.card_kind({})) == (NOTES, "think")  # a card shows an ACP kind
    p, asker = perms(tmp_path, "auto", "reject_once")
    assert outcome(p, asker, spec.call_kind({})) == ASK
