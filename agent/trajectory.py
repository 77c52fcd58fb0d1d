"""Trajectory files: a session's transcript as JSON lines, one internal message per line.

The same file is a `replay:` recording (`agent.providers.replay` plays its assistant turns).
"""

from __future__ import annotations

import json
from pathlib import Path

from agent.store import Store


def write_transcript(store: Store, session_id: str, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{session_id}.jsonl"
    tmp = path.with_suffix(".jsonl.tmp")
    with tmp.open("w", encoding="utf-8") as out:
        for message in store.messages(session_id):
            out.write(json.dumps(message, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path
