"""Arguments of Talaria's `workspace/executeCommand` commands, the prompts they become, and
the code actions that invoke them. Plain JSON in, plain JSON out.

    talaria.ask      ["prompt"] | ["prompt", {uri, range}] | [{uri, range}] | [{prompt, uri, range}]
    talaria.fix      [{uri, range, diagnostics?}]   (diagnostics: LSP Diagnostic objects)
    talaria.explain  [{uri, range}]

Bad arguments raise `ArgumentError` with one line saying what to send.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from talaria.acp_server.lsp.edits import line_count, offset_at

DEFAULT_QUESTION = "What does this code do, and is anything wrong with it?"
REFACTOR = ("Refactor this code: make it clearer and simpler without changing what it does. "
            "Edit the file.")
MAX_DIAGNOSTICS = 20
"""Diagnostics quoted in a fix prompt; the rest are counted."""
MAX_POSITION = 2**31 - 1
"""Largest line or character in a position (LSP's uinteger)."""
TARGET_SHAPE = "{uri: \"file:///...\", range: {start: {line, character}, end: {line, character}}}"


class ArgumentError(ValueError):
    """Command arguments Talaria cannot use; the message says what to send instead."""


@dataclass(frozen=True, slots=True)
class Target:
    """A range of a document, checked against its text."""

    uri: str
    path: Path
    range: dict[str, Any]
    text: str
    """The document's whole text (the open buffer, else the disk)."""
    diagnostics: tuple[dict[str, Any], ...] = ()

    @property
    def lines(self) -> tuple[int, int]:
        """1-based first and last line, for people (an end at column 0 is not included)."""
        start, end = self.range["start"], self.range["end"]
        last = end["line"] if end["character"] == 0 and end["line"] > start["line"] else end["line"] + 1
        return start["line"] + 1, last

    def selected(self, encoding: str) -> str:
        return self.text[offset_at(self.text, self.range["start"], encoding):
                         offset_at(self.text, self.range["end"], encoding)]


def split_ask(args: list[Any]) -> tuple[str | None, dict[str, Any] | None]:
    """(prompt, raw target) of `talaria.ask`'s arguments."""
    if not args:
        raise ArgumentError('talaria.ask needs a prompt: arguments ["your question"] '
                            f"(optionally followed by {TARGET_SHAPE})")
    first, rest = args[0], args[1:]
    if isinstance(first, dict):
        prompt = first.get("prompt")
        if prompt is not None and not isinstance(prompt, str):
            raise ArgumentError("talaria.ask: `prompt` must be a string")
        return prompt, first if "uri" in first else None
    if not isinstance(first, str) or not first.strip():
        raise ArgumentError('talaria.ask: the first argument must be the prompt, a non-empty string')
    if rest and not isinstance(rest[0], dict | type(None)):
        raise ArgumentError(f"talaria.ask: the second argument must be {TARGET_SHAPE}")
    return first, rest[0] if rest else None


def target_arg(command: str, args: list[Any]) -> dict[str, Any]:
    if not args or not isinstance(args[0], dict):
        raise ArgumentError(f"{command} needs the code to work on: arguments [{TARGET_SHAPE}]")
    return args[0]


def path_of(uri: Any) -> Path:
    if not isinstance(uri, str):
        raise ArgumentError(f"`uri` must be a string: {TARGET_SHAPE}")
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        raise ArgumentError(f"only file: URIs can be worked on, not {uri!r}")
    return Path(unquote(parsed.path))


def check_file(path: Path) -> None:
    """`path` is a file a command may read: a regular file, never a FIFO or a device (opening
    one blocks, reading one may never end)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise ArgumentError(f"`uri`: {path} does not exist (not open in the editor, not on disk)") from None
    except OSError as exc:
        raise ArgumentError(f"`uri`: cannot read {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise ArgumentError(f"`uri` names a directory ({path}): send the URI of a file")
    if not stat.S_ISREG(mode):
        kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "a device")
        raise ArgumentError(f"`uri` names {kind} ({path}), not a file: send the URI of a file")


def check_range(raw: Any, text: str, uri: str) -> dict[str, Any]:
    """`raw` as a range within `text` (start before end); ArgumentError otherwise."""
    shape = "`range` must be {start: {line, character}, end: {line, character}} of integers"
    if not isinstance(raw, dict):
        raise ArgumentError(f"{shape}, got {_shown(raw)}")
    start, end = (_position(raw.get(k), k, shape) for k in ("start", "end"))
    if (end["line"], end["character"]) < (start["line"], start["character"]):
        raise ArgumentError(f"`range` ends (line {end['line']}) before it starts (line "
                            f"{start['line']}): send start before end")
    lines = line_count(text)
    if end["line"] >= lines:
        name = Path(unquote(urlparse(uri).path)).name
        raise ArgumentError(f"the range ends on line {end['line'] + 1} but {name} has {lines} "
                            "line(s): send a range inside the document (0-based lines)")
    return {"start": start, "end": end}


def _position(raw: Any, key: str, shape: str) -> dict[str, int]:
    if not isinstance(raw, dict):
        raise ArgumentError(f"{shape}: `range.{key}` is {_shown(raw)}")
    position = {}
    for field in ("line", "character"):
        value = raw.get(field)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ArgumentError(f"{shape}: `range.{key}.{field}` is {_shown(value)}")
        if not 0 <= value <= MAX_POSITION:
            raise ArgumentError(f"`range.{key}.{field}` is {value}: LSP positions are 0 to "
                                f"{MAX_POSITION}")
        position[field] = value
    return position


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def diagnostics_of(raw: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    found = raw.get("diagnostics") or ()
    if not isinstance(found, list | tuple):
        raise ArgumentError("`diagnostics` must be a list of LSP Diagnostic objects")
    return tuple(d for d in found if isinstance(d, dict) and isinstance(d.get("message"), str))


def ask_prompt(prompt: str | None, target: Target | None, rel: str, encoding: str) -> str:
    question = prompt.strip() if prompt and prompt.strip() else DEFAULT_QUESTION
    if target is None:
        return question
    return f"{question}\n\n{_quote(target, rel, encoding)}"


def fix_prompt(target: Target, rel: str, encoding: str) -> str:
    first, last = target.lines
    where = f"{rel} line {first}" if first == last else f"{rel} lines {first}-{last}"
    if not target.diagnostics:
        head = (f"Fix the problems in {where}. The editor gave no diagnostics for it: find "
                "what is wrong (run the project's checks if that helps), then edit the file.")
    else:
        shown = [_diagnostic(d) for d in target.diagnostics[:MAX_DIAGNOSTICS]]
        more = len(target.diagnostics) - len(shown)
        if more:
            shown.append(f"- ... and {more} more")
        head = (f"Fix the problems the editor reports in {where}, then check the fix:\n"
                + "\n".join(shown))
    return f"{head}\n\n{_quote(target, rel, encoding)}"


def explain_prompt(target: Target, rel: str, encoding: str) -> str:
    return ("Explain what this code does and how it fits in its file; point out anything "
            f"surprising or wrong. Do not edit any file.\n\n{_quote(target, rel, encoding)}")


def _diagnostic(d: dict[str, Any]) -> str:
    line = d.get("range", {}).get("start", {}).get("line")
    where = f"line {line + 1}: " if isinstance(line, int) else ""
    source = " ".join(str(d[k]) for k in ("source", "code") if d.get(k) not in (None, ""))
    return f"- {where}{d['message']}" + (f" ({source})" if source else "")


def _quote(target: Target, rel: str, encoding: str) -> str:
    first, last = target.lines
    where = f"{rel}:{first}" if first == last else f"{rel}:{first}-{last}"
    selected = target.selected(encoding)
    if not selected.strip():
        return f"The cursor is in {where}."
    fence = "````" if "```" in selected else "```"
    return f"The code ({where}):\n{fence}\n{selected.rstrip()}\n{fence}"


def code_actions(uri: str, range_: dict[str, Any], diagnostics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The code actions Talaria offers for a range: Fix on diagnostics, Ask and Refactor on
    a selection."""
    target = {"uri": uri, "range": range_}
    actions = []
    if diagnostics:
        actions.append({
            "title": "Fix with Talaria", "kind": "quickfix", "diagnostics": diagnostics,
            "command": {"title": "Fix with Talaria", "command": "talaria.fix",
                        "arguments": [{**target, "diagnostics": diagnostics}]},
        })
    if range_["start"] != range_["end"]:
        actions.append({
            "title": "Ask Talaria about this", "kind": "refactor",
            "command": {"title": "Ask Talaria about this", "command": "talaria.ask",
                        "arguments": [target]},
        })
        actions.append({
            "title": "Refactor with Talaria", "kind": "refactor.rewrite",
            "command": {"title": "Refactor with Talaria", "command": "talaria.ask",
                        "arguments": [REFACTOR, target]},
        })
    return actions
