"""The sandbox tier `initialize` reports: detected with the real bwrap in a thread, and kept
in $TALARIA_HOME/run/sandbox.json with the facts it depends on, so a later start answers with
it at once while those facts hold."""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from talaria.acp_server.sandbox_probe import SandboxProbe, facts


def detected(path: Path) -> tuple[SandboxProbe, str]:
    probe = SandboxProbe(path)
    assert probe._done.wait(30)
    return probe, anyio.run(probe.tier)


def test_the_tier_is_kept_with_its_facts_and_used_while_they_hold(tmp_path: Path) -> None:
    path = tmp_path / "run" / "sandbox.json"
    first, tier = detected(path)  # nothing kept: initialize waits for the real detection
    assert first._known is None and tier in ("bubblewrap", "landlock", "rlimits")
    assert json.loads(path.read_text()) == {"tier": tier, "facts": facts()}
    second, again = detected(path)
    assert second._known == tier == again  # what initialize answers before detection ends

    other = "rlimits" if tier != "rlimits" else "landlock"
    path.write_text(json.dumps({"tier": other, "facts": facts()}))
    stale, real = detected(path)  # a finding that no longer holds is rewritten
    assert stale._known == other and real == tier
    assert json.loads(path.read_text())["tier"] == tier

    path.write_text(json.dumps({"tier": other, "facts": ["another kernel"]}))
    changed = SandboxProbe(path)
    assert changed._known is None  # the facts changed: detect before answering
    assert changed._done.wait(30)  # (its detection rewrites the file: not over the next write)
    path.write_text("not json")
    assert SandboxProbe(path)._known is None


def test_with_a_kept_tier_the_detection_can_wait_off_the_start(tmp_path: Path) -> None:
    path = tmp_path / "run" / "sandbox.json"
    _, tier = detected(path)
    later = SandboxProbe(path, recheck_after=0.2)  # what `talaria acp` does (RECHECK_AFTER_S)
    assert later._known == tier  # what initialize answers meanwhile
    assert later._done.wait(30) and anyio.run(later.tier) == tier  # detected all the same
    path.unlink()
    first = SandboxProbe(path, recheck_after=60)  # nothing kept: no waiting
    assert first._done.wait(30) and anyio.run(first.tier) == tier
