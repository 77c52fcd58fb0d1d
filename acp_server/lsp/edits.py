"""Text edits between two versions of a document, in LSP terms (plain JSON, no lsprotocol).

    edits = text_edits(old, new, "utf-16")   # [{"range": {...}, "newText": str}, ...]
    apply_edits(old, edits, "utf-16") == new

Edits replace whole lines (positions at character 0), so they hold in every position
encoding; only a document whose last line has no line break needs that line's length in the
negotiated encoding (`utf-8`, `utf-16` or `utf-32`). Lines end at `\\n`, `\\r\\n` or `\\r`,
as LSP counts them (Python's `splitlines` also splits on form feeds and U+2028: LSP does not).
"""

from __future__ import annotations

import difflib
import re
from typing import Any

LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
ENCODINGS = ("utf-8", "utf-16", "utf-32")


def split_lines(text: str) -> list[str]:
    """The lines of `text`, each with its line break (the last may have none)."""
    return LINE.findall(text)


def line_count(text: str) -> int:
    """Lines as LSP counts them: "a\\n" has two (the second is empty)."""
    lines = split_lines(text)
    return len(lines) + (1 if not lines or lines[-1][-1:] in ("\n", "\r") else 0)


def units(text: str, encoding: str) -> int:
    """Length of `text` in the position encoding's code units."""
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    if encoding == "utf-16":
        return len(text.encode("utf-16-le")) // 2
    return len(text)


def position(line: int, character: int) -> dict[str, int]:
    return {"line": line, "character": character}


def text_edits(old: str, new: str, encoding: str = "utf-16") -> list[dict[str, Any]]:
    """Line-granular edits turning `old` into `new` (none when they are equal)."""
    a, b = split_lines(old), split_lines(new)
    edits = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        edits.append({"range": {"start": _start(a, i1, encoding), "end": _end(a, i2, encoding)},
                      "newText": "".join(b[j1:j2])})
    return edits


def _start(lines: list[str], index: int, encoding: str) -> dict[str, int]:
    if index == len(lines) and lines and lines[-1][-1:] not in ("\n", "\r"):
        # Appending after a last line with no line break: insert at its end.
        return position(index - 1, units(_bare(lines[-1]), encoding))
    return position(index, 0)


def _end(lines: list[str], index: int, encoding: str) -> dict[str, int]:
    if index == len(lines) and lines and lines[-1][-1:] not in ("\n", "\r"):
        return position(index - 1, units(lines[-1], encoding))
    return position(index, 0)


def _bare(line: str) -> str:
    return line.rstrip("\r\n")


def offset_at(text: str, pos: dict[str, int], encoding: str = "utf-16") -> int:
    """The string index of an LSP position; past the end of a line means its end."""
    lines = split_lines(text)
    line, character = pos["line"], pos["character"]
    if line >= len(lines):
        return len(text)
    start = sum(len(chunk) for chunk in lines[:line])
    bare = _bare(lines[line])
    count = 0
    for i, char in enumerate(bare):
        if count >= character:
            return start + i
        count += units(char, encoding)
    return start + len(bare)


def apply_edits(text: str, edits: list[dict[str, Any]], encoding: str = "utf-16") -> str:
    """`text` with non-overlapping `edits` applied (what an editor does with them)."""
    spans = sorted(
        ((offset_at(text, e["range"]["start"], encoding), offset_at(text, e["range"]["end"], encoding),
          e["newText"]) for e in edits),
        reverse=True,
    )
    for start, end, new_text in spans:
        text = text[:start] + new_text + text[end:]
    return text
