"""Which tool results hold what a secret path held: decided when the result is stored.

A result is marked (`WITHHELD` in the message, naming the path; the store copies it into the
`messages.withheld` column and keeps the message out of the search index) when its call
- acts on a secret path (`Sensitive.secret`: keys, `.env`, credentials) among its planned
  paths: read_file of `~/.ssh/id_rsa`, search_files in `~/.aws`;
- or runs text that mentions one (its `ToolSpec.command_arg`): a terminal command
  `cat ~/.ssh/id_rsa`, an execute_code script `open(".env").read()`;
- or, for a call that makes calls of its own (execute_code's scripts, delegate_task's
  subagents), when one of those was such a call;
- or reads the output of a background process such a call started (`process` log / poll /
  wait of `terminal(command="cat .env", background=true)`).
`session_search` and trajectory exports show `talaria.tools.redact.withheld_note(path)`
instead of the content; the live context and the session's own transcript (`session/load`,
the raw transcript file) keep it: the user saw it there. The mark is by path, never by shape:
`SSH-CANARY-...` in a key file is nothing a redaction pattern could know. What quotes such a
result elsewhere in its session (the model's answer "the key ends with SSH-CANARY-...") loses
the result's telling words (`redact.quoted_words`): in the index as it is stored, and in
recall and exports when shown (a session loaded again indexes without them, recall still
takes them out).

Not caught (what the shape rules in `talaria.tools.redact` still see): a path spelt so no
word of the text names it (`cat ~/.s?h/id_*`, a name built at run time), and the output tail
of a background process shown in the notice of its end (a user message of its own).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from talaria.agent.transcript import calls_of, is_tool_result
from talaria.tools.paths import Sensitive, resolve
from talaria.tools.redact import WITHHELD

MAX_MENTIONS = 2_000
"""Distinct words of what one call runs checked against the path policy (~0.15 ms each); a
call with more is marked unchecked (hiding one result from recall costs less than judging a
megabyte of words on the event loop)."""
MAX_WORD_CHARS = 4_096
"""Longer words are no path (PATH_MAX)."""
TOO_LONG = "(a call too long to check for secret paths)"
RUN_ARGS = ("command", "code")
"""Where a stored call kept what it ran (terminal, execute_code), for `judge_stored`: the
tools' specs are not at hand when an old database is opened."""
_WORD = re.compile(r"[^\s'\"`;|&<>(){}\[\],=:]+")
_HOME_VARIABLE = re.compile(r"^(?:\$HOME\b|\$\{HOME\}|~(?=/|$))")


@dataclass(slots=True)
class Withholding:
    """A session's marks until its results are stored: call id -> the secret path it reached,
    and for calls made inside another (a script's, a subagent's) the outer call's id."""

    marks: dict[str, str] = field(default_factory=dict)
    outer: dict[str, str] = field(default_factory=dict)
    quoted: frozenset[str] = frozenset()
    """The telling words of this session's withheld results (`redact.quoted_words`): kept out
    of the search index of its later messages."""
    processes: dict[str, str] = field(default_factory=dict)
    """Background processes started by a call that reached a secret: id -> the path (their
    output, read later with `process`, is withheld too)."""
    reached: str | None = None
    """The first secret path a stored result of this session reached (a subagent's marks
    its parent's delegate_task result)."""

    def record(self, call_id: str, reason: str | None, parent: str | None = None) -> None:
        """Note `call_id`'s reason (None: it reached no secret) under the call it runs in."""
        root = self.outer.get(parent, parent) if parent else None
        if root is not None:
            self.outer[call_id] = root
        if reason is not None:
            self.marks.setdefault(call_id, reason)
            if root is not None:
                self.marks.setdefault(root, reason)


def secret_reached(sensitive: Sensitive, cwd: Path, paths: tuple[Path, ...],
                   runs: str | None) -> str | None:
    """The first secret path a call acts on, or whose name what it runs (a command, a
    script) holds as a word; None when none."""
    for path in paths:
        if sensitive.secret(path):
            return str(path)
    words = dict.fromkeys(_WORD.findall(runs or ""))
    if len(words) > MAX_MENTIONS:
        return TOO_LONG
    home = str(sensitive.home)
    found = sensitive.first_secret(resolve(_HOME_VARIABLE.sub(lambda _: home, word), cwd)
                                   for word in words if len(word) <= MAX_WORD_CHARS)
    return str(found) if found is not None else None


def refused(message: Mapping[str, Any]) -> bool:
    """A result of a call refused before it ran (it holds nothing to withhold)."""
    content = message.get("content")
    if message.get("status") != "failed" or not isinstance(content, str):
        return False
    try:
        result = json.loads(content)
    except json.JSONDecodeError:
        return False
    return isinstance(result, dict) and result.get("rejected") is True



def judge_stored(rows: Iterable[tuple[int, str, dict[str, Any]]],
                 sensitive: Sensitive | None = None) -> list[tuple[int, str]]:
    """(rowid, path) of the stored tool results that reached a secret path, from rows of
    (rowid, the session's cwd, message) in transcript order: a database written before
    results were marked (`store_migrate`). Judged by `sensitive` (default: this user's
    default policy) from each result's locations and what its call ran (the arguments a
    command or a script is given in: `RUN_ARGS`)."""
    sensitive = sensitive or Sensitive(Path.home())
    calls: dict[str, dict[str, Any]] = {}
    marks: list[tuple[int, str]] = []
    for rowid, cwd, message in rows:
        for call in calls_of(message):
            calls[str(call.get("id"))] = _arguments(call.get("arguments"))
        if is_tool_result(message) and not message.get(WITHHELD):
            paths = tuple(Path(p) for p in message.get("locations") or () if isinstance(p, str))
            args = calls.pop(str(message.get("tool_call_id")), {})
            runs = next((args[k] for k in RUN_ARGS if isinstance(args.get(k), str)), None)
            if (reason := secret_reached(sensitive, Path(cwd), paths, runs)) and not refused(message):
                marks.append((rowid, reason))
    return marks


def _arguments(raw: Any) -> dict[str, Any]:
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return {"text": raw}
    return args if isinstance(args, dict) else {}
