"""What precedes success: tool-call n-grams of solved vs unsolved attempts, and repeated errors.

statistics.json gains

    "sequences": {"solved_trajectories": S, "unsolved_trajectories": U, "min_support",
                  "score": how it is computed (below),
                  "solved":   [{"ngram": [tool, ...], "solved": a, "unsolved": b,
                                "solved_share": a/S, "unsolved_share": b/U, "score", "z"}, ...],
                  "unsolved": [the same, most over-represented in unsolved attempts first]},
    "tool_errors": [{"tool", "message" (normalised), "count", "trajectories", "example",
                     "task_id" (of the example)}, ...]

An attempt's sequence is the names of its tool calls in call order (the calls of one model
turn in the order the model gave them). Its n-grams (n = 1..MAX_N) are counted once per
attempt, so a and b are numbers of attempts, not of calls. Only checked attempts count
(`resolved` true: solved, false: unsolved). The score is the log odds ratio with Haldane's ½
added to each cell, `ln((a+½)/(S−a+½)) − ln((b+½)/(U−b+½))`: positive when the n-gram is more
common among solved attempts; `z` is the score over its standard error
`sqrt(1/(a+½) + 1/(S−a+½) + 1/(b+½) + 1/(U−b+½))`, to tell a strong signal from a small count.
An n-gram is listed only when at least MIN_SUPPORT attempts hold it; TOP_NGRAMS per side.

A failed tool call's error (`{"error": ...}` in its result) is grouped by its tool and its
message normalised: ids (UUIDs, hex of 8+ digits), paths (anything with a slash, file names
with a common extension) and numbers become `<id>`, `<path>`, `<n>`, whitespace is collapsed,
and the result is cut at MESSAGE_CHARS. Groups seen at least MIN_REPEATS times are listed,
most frequent first (TOP_ERRORS), with the first raw message as the example. Every line
counts for errors, checked or not.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from typing import Any

MAX_N = 3
MIN_SUPPORT = 3
"""Attempts an n-gram must appear in (solved and unsolved together) to be listed."""
TOP_NGRAMS = 15
MIN_REPEATS = 2
TOP_ERRORS = 20
MESSAGE_CHARS = 160
EXAMPLE_CHARS = 300
SCORE = ("log odds ratio, Haldane-corrected: ln((a+.5)/(S-a+.5)) - ln((b+.5)/(U-b+.5)); "
         "a, b: solved / unsolved attempts holding the n-gram of S, U; z = score / its "
         "standard error")

_CALL = re.compile(r"^<tool_call>\n(.+)\n</tool_call>$", re.MULTILINE)
_RESPONSE = re.compile(r"^<tool_response>\n(.+)\n</tool_response>$", re.MULTILINE)
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_HEX = re.compile(r"\b(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{8,}\b")
_PATH = re.compile(r"(?:[~\w.-]*/[^\s'\"`:,;()\[\]{}<>]+)|"
                   r"\b[\w-]+\.(?:py|pyi|js|ts|tsx|jsx|json|toml|ya?ml|md|txt|cfg|ini|sh|c|h|"
                   r"cpp|hpp|go|rs|java|rb|html|css|lock|log|csv|sql)\b")
_NUMBER = re.compile(r"\b0x[0-9a-fA-F]+\b|(?<![\w.])\d+(?:\.\d+)?")
"""A number not inside a word (`2.5s` is `<n>s`; `ws3`, `v1.2` stay)."""


def calls_and_errors(line: dict[str, Any]) -> tuple[list[str], list[tuple[str, str]]]:
    """(tool names in call order, [(tool, error message)] of failed calls) of one line: a
    ShareGPT line (`conversations`) or a record with `messages`."""
    if "conversations" not in line:
        return _from_messages(line.get("messages") or [])
    names: list[str] = []
    errors: list[tuple[str, str]] = []
    for turn in line.get("conversations") or ():
        value = turn.get("value") or ""
        if turn.get("from") == "gpt" and "<tool_call>" in value:
            names += [str(body.get("name") or "?") for body in _bodies(_CALL, value)]
        elif turn.get("from") == "tool":
            for body in _bodies(_RESPONSE, value):
                if (error := _error_of(body.get("content"))) is not None:
                    errors.append((str(body.get("name") or "?"), error))
    return names, errors


def _bodies(pattern: re.Pattern[str], value: str) -> list[dict[str, Any]]:
    out = []
    for block in pattern.findall(value):
        try:
            body = json.loads(block)
        except ValueError:
            continue
        if isinstance(body, dict):
            out.append(body)
    return out


def _error_of(content: Any) -> str | None:
    if isinstance(content, str) and content.lstrip().startswith("{"):
        try:
            content = json.loads(content)
        except ValueError:
            return None
    if isinstance(content, dict) and content.get("error") not in (None, ""):
        error = content["error"]
        return error if isinstance(error, str) else json.dumps(error, ensure_ascii=False)
    return None


def _from_messages(messages: list[dict[str, Any]]) -> tuple[list[str], list[tuple[str, str]]]:
    from talaria.agent.transcript import calls_of, is_assistant, is_tool_result

    names: list[str] = []
    errors: list[tuple[str, str]] = []
    for message in messages:
        if is_assistant(message):
            names += [str(call.get("name") or "?") for call in calls_of(message)]
        elif is_tool_result(message):
            error = _error_of(message.get("content"))
            if error is not None or message.get("status") == "failed":
                errors.append((str(message.get("name") or "?"), error or "failed"))
    return names, errors


def normalise(message: str) -> str:
    """The error's shape: ids, paths and numbers replaced, whitespace collapsed, cut."""
    text = _UUID.sub("<id>", message)
    text = _HEX.sub("<id>", text)
    text = _PATH.sub("<path>", text)
    text = _NUMBER.sub("<n>", text)
    text = " ".join(text.split())
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"


def ngrams(names: list[str], most: int = MAX_N) -> set[tuple[str, ...]]:
    return {tuple(names[i:i + n]) for n in range(1, most + 1) for i in range(len(names) - n + 1)}


def log_odds(a: int, solved: int, b: int, unsolved: int) -> tuple[float, float]:
    """(score, z) of an n-gram in a of `solved` and b of `unsolved` attempts (see above)."""
    cells = (a + 0.5, solved - a + 0.5, b + 0.5, unsolved - b + 0.5)
    score = math.log(cells[0] / cells[1]) - math.log(cells[2] / cells[3])
    return score, score / math.sqrt(sum(1 / c for c in cells))


class Sequences:
    """Accumulates lines one at a time (never holding them) for statistics.json."""

    def __init__(self) -> None:
        self.solved: Counter[tuple[str, ...]] = Counter()
        self.unsolved: Counter[tuple[str, ...]] = Counter()
        self.attempts = {True: 0, False: 0}
        self.errors: Counter[tuple[str, str]] = Counter()
        self.error_lines: Counter[tuple[str, str]] = Counter()
        self.examples: dict[tuple[str, str], tuple[str, str]] = {}

    def add(self, line: dict[str, Any]) -> None:
        names, errors = calls_and_errors(line)
        resolved = line.get("resolved")
        if isinstance(resolved, bool):
            self.attempts[resolved] += 1
            (self.solved if resolved else self.unsolved).update(ngrams(names))
        seen = set()
        for tool, message in errors:
            key = (tool, normalise(message))
            self.errors[key] += 1
            seen.add(key)
            self.examples.setdefault(key, (" ".join(message.split())[:EXAMPLE_CHARS],
                                           str(line.get("task_id", line.get("prompt_index", "")))))
        self.error_lines.update(seen)

    def to_dict(self) -> dict[str, Any]:
        return {"sequences": self._sequences(), "tool_errors": self._errors()}

    def _sequences(self) -> dict[str, Any]:
        solved, unsolved = self.attempts[True], self.attempts[False]
        out: dict[str, Any] = {"solved_trajectories": solved, "unsolved_trajectories": unsolved,
                               "min_support": MIN_SUPPORT, "score": SCORE,
                               "solved": [], "unsolved": []}
        if not solved or not unsolved:  # nothing to tell apart
            return out
        rows: list[dict[str, Any]] = []
        for gram in self.solved.keys() | self.unsolved.keys():
            a, b = self.solved[gram], self.unsolved[gram]
            if a + b < MIN_SUPPORT:
                continue
            score, z = log_odds(a, solved, b, unsolved)
            rows.append({"ngram": list(gram), "solved": a, "unsolved": b,
                         "solved_share": round(a / solved, 4),
                         "unsolved_share": round(b / unsolved, 4),
                         "score": round(score, 4), "z": round(z, 3)})
        ahead = sorted((r for r in rows if r["score"] > 0), key=lambda r: (-r["score"], -r["z"], r["ngram"]))
        behind = sorted((r for r in rows if r["score"] < 0), key=lambda r: (r["score"], r["z"], r["ngram"]))
        out["solved"], out["unsolved"] = ahead[:TOP_NGRAMS], behind[:TOP_NGRAMS]
        return out

    def _errors(self) -> list[dict[str, Any]]:
        repeated = [(key, n) for key, n in self.errors.items() if n >= MIN_REPEATS]
        repeated.sort(key=lambda kv: (-kv[1], kv[0]))
        return [{"tool": tool, "message": message, "count": n,
                 "trajectories": self.error_lines[(tool, message)],
                 "example": self.examples[(tool, message)][0],
                 "task_id": self.examples[(tool, message)][1]}
                for (tool, message), n in repeated[:TOP_ERRORS]]
