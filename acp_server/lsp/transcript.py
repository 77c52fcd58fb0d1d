"""A markdown transcript per `talaria lsp` session: each request, its answer, what it did.

The file (`$TALARIA_HOME/lsp/transcripts/<session id>.md`) is what `window/showDocument` opens
after a request, with the new answer selected; the full history stays in the session store.
"""

from __future__ import annotations

import time
from pathlib import Path

from talaria.acp_server.lsp.edits import line_count


def transcript_path(home: Path, session_id: str) -> Path:
    return home / "lsp" / "transcripts" / f"{session_id}.md"


def append(path: Path, *, title: str, answer: str, tools: list[str], edited: list[str],
           stop_reason: str) -> int:
    """Add one request to the transcript; returns the 0-based line where its answer starts."""
    path.parent.mkdir(parents=True, exist_ok=True)
    before = path.read_text(encoding="utf-8") if path.exists() else f"# Talaria session {path.stem}\n"
    head = f"\n## {title.strip().splitlines()[0] if title.strip() else 'Request'}\n\n"
    head += f"_{time.strftime('%Y-%m-%d %H:%M')}_\n\n"
    start = line_count(before + head) - 1
    body = (answer.strip() or "_(no answer text)_") + "\n"
    if tools:
        body += "\n**Tools:** " + "; ".join(tools) + "\n"
    if edited:
        body += "\n**Edited:** " + ", ".join(edited) + "\n"
    if stop_reason != "end_turn":
        body += f"\n_Stopped: {stop_reason}_\n"
    path.write_text(before + head + body, encoding="utf-8")
    return start
