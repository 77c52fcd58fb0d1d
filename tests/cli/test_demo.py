"""`talaria demo` as a subprocess: a `talaria acp` child fixes the bundled project, no API key."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.acp.test_client import agent_env

FIX = "+    return len(text.split())"


def demo(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "talaria.acp_server", "demo", *args],
                          env=agent_env(tmp_path / "home", TMPDIR=str(tmp_path)), cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL, start_new_session=True)


def test_demo_fixes_the_project_through_the_editor_path(tmp_path: Path) -> None:
    result = demo(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert out.startswith(f"Demo project: {tmp_path}") and "✓ Edit textstats.py" in out
    assert "--- diff ---" in out and FIX in out and "tests: pass" in out
    edits = re.search(r"^edits received as fs/write_text_file: (\d+)$", out, re.M)
    assert edits and int(edits.group(1)) >= 1
    trajectory = Path(re.search(r"^trajectory: (.+)$", out, re.M).group(1))  # type: ignore[union-attr]
    assert trajectory.parent == tmp_path / "home" / "trajectories"
    roles = [json.loads(line)["role"] for line in trajectory.read_text().splitlines()]
    assert roles[:2] == ["system", "user"] and "tool" in roles
    assert "Traceback" not in result.stderr


def test_demo_json_ends_with_a_summary(tmp_path: Path) -> None:
    result = demo(tmp_path, "--json")
    assert result.returncode == 0, result.stderr
    *updates, summary = [json.loads(line) for line in result.stdout.splitlines()]
    assert summary["type"] == "demo" and summary["stop_reason"] == "end_turn"
    assert summary["tests_pass"] is True and summary["edits_via_acp"] >= 1 and FIX in summary["diff"]
    assert updates and all(set(u) == {"sessionId", "update"} for u in updates)


def test_demo_leaves_no_directory_behind_unless_kept(tmp_path: Path) -> None:
    """Issue 28: every demo run left a talaria-demo-* directory in the temp dir."""
    result = demo(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "removed at the end; --keep keeps it" in result.stdout
    assert not list(tmp_path.glob("talaria-demo-*"))
    kept = demo(tmp_path, "--keep", "--json")
    assert kept.returncode == 0, kept.stderr
    project = Path(json.loads(kept.stdout.splitlines()[-1])["project"])
    assert project.parent.name.startswith("talaria-demo-") and (project / "textstats.py").exists()
