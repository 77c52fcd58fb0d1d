"""Golden files for the main `session/update` shapes: a change that the schema still accepts
(a renamed `_meta` key, a field moved, a kind changed) shows up as a diff to accept
deliberately (TALARIA_UPDATE_GOLDEN=1), not by accident.

One scripted session through a real `talaria acp`: thought and text chunks, tool cards with a
diff and a terminal, a plan, usage, the title, slash commands, a mode change, a compaction
notice. Volatile values (ids, paths, times, token counts) are replaced by placeholders.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.acp_harness import Editor
from tests.helpers import check_golden


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def normalize(value: Any, names: dict[str, str], project: str) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in ("toolCallId", "terminalId", "sessionId", "compactionId") and isinstance(item, str):
                out[key] = names.setdefault(item, f"<{key}:{sum(1 for n in names.values() if n.startswith(f'<{key}')) + 1}>")
            elif key in ("updatedAt",):
                out[key] = "<time>"
            elif key in ("used", "size", "beforeTokens", "afterTokens") and isinstance(item, int):
                out[key] = "<tokens>"
            else:
                out[key] = normalize(item, names, project)
        return out
    if isinstance(value, list):
        return [normalize(item, names, project) for item in value]
    if isinstance(value, str):
        value = value.replace(project, "<project>")
        return re.sub(r"\d[\d,]* (?:->|to) \d[\d,]* tokens", "<n> -> <n> tokens", value)
    return value


def test_session_update_shapes_match_the_goldens(tmp_path: Path, fake_llm) -> None:
    fake_llm.script([
        {"reasoning": "Plan first.", "text": "Editing.", "tool_calls": [
            call("todo", todos=[{"id": "1", "content": "fix a.txt", "status": "in_progress"}]),
            call("patch", path="a.txt", old_string="one", new_string="two"),
        ]},
        {"tool_calls": [call("terminal", command="echo checked")]},
        {"text": "Done."},
    ])
    with Editor(tmp_path, fake_llm) as ed:
        (ed.project / "a.txt").write_text("one\n")
        ed.initialize()
        sid = ed.new_session()
        assert ed.prompt(sid, "Fix a.txt")["stopReason"] == "end_turn"
        assert ed.prompt(sid, "/mode plan")["stopReason"] == "end_turn"
        assert ed.prompt(sid, "/compact")["stopReason"] == "end_turn"
        updates = ed.updates(sid)
    names: dict[str, str] = {}
    shapes = [normalize(u, names, str(ed.project)) for u in updates]
    # Streamed chunks are cut where the stream cuts them: keep the first of each run.
    kept = [s for i, s in enumerate(shapes)
            if not (i and s.get("sessionUpdate", "").endswith("_chunk")
                    and shapes[i - 1].get("sessionUpdate") == s.get("sessionUpdate"))]
    check_golden("session_updates.json", json.dumps(kept, indent=1, sort_keys=True) + "\n")
