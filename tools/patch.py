"""`patch`: find-and-replace edit of one file (Hermes-compatible), tolerant of whitespace.

Matching, in order: the exact `old_string` (with its line endings converted to the file's);
then, line by line, ignoring each line's leading and trailing whitespace and CRLF, mapped
back onto whole lines of the original text and re-indented to the file's indentation. Models
often get indentation or trailing spaces slightly wrong; the fallback saves a round trip
without ever matching different words.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from talaria.tools.context import ToolContext
from talaria.tools.errors import WorkspaceError
from talaria.tools.paths import display, resolve
from talaria.tools.read_file import split_lines
from talaria.tools.registry import tool
from talaria.tools.write_file import newline_of, with_newline

MAX_DIFF_CHARS = 20_000
MAX_LISTED = 10
"""At most this many line numbers are named in an ambiguity error."""
CLOSEST = 3
CLOSEST_CUTOFF = 0.5
MAX_COMPARE_CHARS = 500


class PatchError(ValueError):
    """The edit cannot be applied; the message says why and what to do."""


def _exact(text: str, old: str) -> list[int]:
    found, i = [], text.find(old)
    while i >= 0:
        found.append(i)
        i = text.find(old, i + len(old))
    return found


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _first_indent(lines: list[str]) -> str:
    return next((_indent(ln) for ln in lines if ln.strip()), "")


def _fuzzy(lines: list[str], old_keys: list[str]) -> list[int]:
    """Indexes of non-overlapping runs of `lines` whose stripped text equals `old_keys`."""
    keys = [ln.strip() for ln in lines]
    n, found, k = len(old_keys), [], 0
    while k + n <= len(keys):
        if keys[k : k + n] == old_keys:
            found.append(k)
            k += n
        else:
            k += 1
    return found


def _closest(text: str, old: str) -> str:
    """The lines most like old_string's most distinctive line, with their numbers."""
    target = max((ln.strip() for ln in split_lines(old)), key=len, default="")
    import difflib  # at an edit, not at start

    sm = difflib.SequenceMatcher(autojunk=False)
    sm.set_seq2(target[:MAX_COMPARE_CHARS])
    scored = []
    for number, line in enumerate(split_lines(text), 1):
        key = line.strip()[:MAX_COMPARE_CHARS]
        if not key:
            continue
        sm.set_seq1(key)
        if (
            sm.real_quick_ratio() >= CLOSEST_CUTOFF
            and sm.quick_ratio() >= CLOSEST_CUTOFF
            and (ratio := sm.ratio()) >= CLOSEST_CUTOFF
        ):
            scored.append((-ratio, number, line.strip()[:200]))
    if not scored:
        return " No similar lines; read the file again."
    best = sorted(scored)[:CLOSEST]
    return " Closest lines:\n" + "\n".join(f"{n}|{t}" for _, n, t in best)


def _ambiguous(count: int, lines: list[int]) -> PatchError:
    listed = ", ".join(map(str, lines[:MAX_LISTED])) + (", ..." if count > MAX_LISTED else "")
    return PatchError(
        f"old_string matches {count} times (lines {listed}); add surrounding context to make "
        "it unique, or set replace_all=true"
    )


def replace(text: str, old: str, new: str, replace_all: bool) -> tuple[str, int, bool]:
    """(new text, replacements, fuzzy) for one patch call; raises PatchError."""
    nl = newline_of(text)
    old_n, new_n = with_newline(old, nl), with_newline(new, nl)
    hits = _exact(text, old_n)
    if len(hits) > 1 and not replace_all:
        raise _ambiguous(len(hits), [text.count("\n", 0, i) + 1 for i in hits])
    if hits:
        if replace_all:
            return text.replace(old_n, new_n), len(hits), False
        return text[: hits[0]] + new_n + text[hits[0] + len(old_n) :], 1, False

    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    if starts[-1] == len(text):
        starts.pop()  # no phantom line after the final newline
    lines = [text[s:e] for s, e in zip(starts, [*starts[1:], len(text)], strict=True)]
    old_lines = split_lines(old.replace("\r\n", "\n"))
    spans = _fuzzy(lines, [ln.strip() for ln in old_lines]) if "".join(old_lines).strip() else []
    if not spans:
        raise PatchError("old_string not found." + _closest(text, old))
    if len(spans) > 1 and not replace_all:
        raise _ambiguous(len(spans), [k + 1 for k in spans])

    n = len(old_lines)
    new_norm = new.replace("\r\n", "\n")
    if old.replace("\r\n", "\n").endswith("\n"):
        new_norm = new_norm.removesuffix("\n")  # the matched lines keep their own terminator
    for k in reversed(spans):
        start = starts[k]
        last = lines[k + n - 1]
        end = starts[k + n - 1] + len(last.rstrip("\r\n"))
        if not new_norm:  # deleting whole lines: take their terminator too
            end = starts[k + n - 1] + len(last)
        # new_string's first line takes the indentation of the first matched line, and the
        # rest keep their indentation relative to it: the model's own is not to be trusted here.
        body = new_norm.split("\n")
        have, want = _first_indent(body), _first_indent(lines[k : k + n])
        body = [want + ln[len(have) :] if ln.strip() and ln.startswith(have) else ln for ln in body]
        text = text[:start] + (nl.join(body) if new_norm else "") + text[end:]
    return text, len(spans), True


def unified_diff(old: str, new: str, name: str) -> str:
    """A unified diff of two texts (line endings ignored), capped at MAX_DIFF_CHARS."""
    import difflib

    diff = "\n".join(
        difflib.unified_diff(
            split_lines(old), split_lines(new), f"a/{name}", f"b/{name}", lineterm=""
        )
    )
    if len(diff) > MAX_DIFF_CHARS:
        diff = diff[:MAX_DIFF_CHARS] + f"\n... [diff cut at {MAX_DIFF_CHARS:,} chars]"
    return diff


def _bad_args(args: dict[str, Any]) -> str | None:
    old, new = args.get("old_string"), args.get("new_string")
    if not isinstance(old, str) or not isinstance(new, str):
        return "old_string and new_string must be strings"
    if not old:
        return "old_string is empty; use write_file to create or overwrite a file"
    if old == new:
        return "old_string and new_string are identical; nothing to change"
    return None


async def _planned(args: dict[str, Any], ctx: ToolContext) -> tuple[Path, str, str, int, bool]:
    """(path, text, new text, replacements, fuzzy): the edit, computed and not written.
    Raises FileNotFoundError, PatchError, WorkspaceError, OSError, ValueError."""
    path = resolve(str(args.get("path") or ""), ctx.cwd)
    text = await ctx.workspace.read_text(path)
    result, count, fuzzy = replace(
        text, args["old_string"], args["new_string"], bool(args.get("replace_all"))
    )
    return path, text, result, count, fuzzy


async def preview_patch(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any] | None:
    """The diff this call would make, or None when it would fail (the handler says why)."""
    if _bad_args(args):
        return None
    try:
        path, text, result, _, _ = await _planned(args, ctx)
    except (FileNotFoundError, PatchError, WorkspaceError, OSError, ValueError):
        return None
    return None if result == text else {"path": str(path), "old_text": text, "new_text": result}


@tool(
    name="patch",
    description=(
        "Replace old_string with new_string in a file and return a diff. old_string must be "
        "unique unless replace_all; whitespace/indentation differences are tolerated."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "old_string": {"type": "string"},
            "new_string": {"type": "string", "description": "Replacement (may be empty)"},
            "replace_all": {"type": "boolean"},
        },
        "required": ["path", "old_string", "new_string"],
    },
    kind="edit",
    path_args=("path",),
    title=lambda a: f"Edit {a['path']}",
    preview=preview_patch,
)
async def patch(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    if error := _bad_args(args):
        return {"error": error}
    raw = str(args.get("path") or "")
    try:
        path, text, result, count, fuzzy = await _planned(args, ctx)
        if result == text:
            return {"error": "the replacement leaves the file unchanged"}
        await ctx.workspace.write_text(path, result)
    except FileNotFoundError:
        return {"error": f"File not found: {raw}"}
    except PatchError as exc:
        return {"error": f"{raw}: {exc}"}
    except ValueError as exc:  # a malformed argument; workspace errors become results in the runner
        return {"error": str(exc)}
    shown = display(path, ctx.cwd)
    out: dict[str, Any] = {
        "path": shown,
        "replacements": count,
        "diff": unified_diff(text, result, shown),
        "_diff": {"path": str(path), "old_text": text, "new_text": result},
    }
    if fuzzy:
        out["note"] = "matched ignoring whitespace differences"
    return out
