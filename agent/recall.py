"""`session_search` over the session store: what was said in past sessions, without a model.

Two shapes, as in Hermes:
- discovery (`query`, `limit`, `sort`): FTS5 matches grouped by session, best session first
  (or newest / oldest first), each with its title, date, the matching snippet and the
  messages around its best hit;
- scroll (`session_id`, `around_message_id`, `window`): the messages around one message, to
  read on from a discovery result (message ids are positions in their session).
With neither, the most recent sessions. Sessions of the current project only unless
`scope="all"`, which is a read outside the project: `reach` names what it reads, the call's
planned paths, and the permission policy asks or refuses as for any such read. The current
session is left out of discovery (it is in the context already).
Every text is redacted as trajectory exports are, and cut to `MAX_MESSAGE_CHARS`; a tool
result marked `withheld` when stored (it came from a secret path, `talaria.agent.withheld`)
shows only a note naming the path, and its telling words (`quoted_words`) are taken out of the
session's other messages shown (a model's answer that quotes the key it read).
"""

from __future__ import annotations

import re
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from talaria.agent.store import Hit, QueryError, SessionRecord, Store, searchable_text
from talaria.agent.transcript import calls_of, is_tool_result, text_of
from talaria.tools.redact import WITHHELD, quoted_words, redact_text, scrub, withheld_note

DEFAULT_LIMIT = 3
MAX_LIMIT = 10
DEFAULT_WINDOW = 5
MAX_WINDOW = 20
HIT_WINDOW = 2
"""Messages shown on each side of a discovery result's best hit."""
SCAN_ROWS = 300
"""Matching messages read before grouping by session (one long session must not hide others)."""
MAX_MESSAGE_CHARS = 1_500
DEFAULT_ROLES = ("user", "assistant")
ALL_ROLES = ("user", "assistant", "tool")
SORTS = ("relevance", "newest", "oldest")
SCOPES = ("project", "all")
_WORD = re.compile(r"\w+", re.UNICODE)
_OPERATORS = {"AND", "OR", "NOT", "NEAR"}


class RecallError(ValueError):
    """Arguments that cannot be answered; the message says what to pass instead."""


def session_search(store: Store, args: dict[str, Any], *, cwd: Path, session_id: str) -> dict[str, Any]:
    """Answer one `session_search` call (blocking: run it off the event loop)."""
    scope = _choice(args, "scope", SCOPES, "project")
    project = None if scope == "all" else str(cwd)
    if args.get("session_id"):
        return _scroll(store, args, project)
    query = str(args.get("query") or "").strip()
    limit = _int(args, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    if not query:
        return _recent(store, project, session_id, limit)
    roles = _roles(args.get("role_filter"))
    sort = _choice(args, "sort", SORTS, "relevance")
    note = None
    try:
        hits = store.search(query, roles=roles, cwd=project, exclude=session_id, rows=SCAN_ROWS)
    except QueryError as exc:
        words = [w for w in _WORD.findall(query) if w not in _OPERATORS]
        if not words:
            raise RecallError(f"the query {query!r} has no words to search for") from None
        hits = store.search(" ".join(f'"{w}"' for w in words), roles=roles, cwd=project,
                            exclude=session_id, rows=SCAN_ROWS)
        note = (f"the query is not valid FTS5 syntax ({exc}); searched for all of its words "
                "instead. Syntax: words (all must match), \"a phrase\", OR, NOT, prefix*")
    results = _discover(store, hits, limit, sort)
    answer: dict[str, Any] = {"query": query, "scope": scope, "count": len(results), "results": results}
    if note:
        answer["note"] = note
    if not results:
        answer["hint"] = ("no match in this project's sessions; try other words, OR between "
                          "alternatives, or scope=\"all\"") if project else "no match in any session"
    return answer


def reach(store: Store, args: dict[str, Any], *, cwd: Path) -> tuple[str, ...]:
    """What a call reads beyond this project's sessions: the store file when it reaches other
    projects' (scope="all", unless it scrolls a session of this project), else nothing. These
    are the call's planned paths: the permission policy judges them like any read. Never
    raises (bad arguments are the call's own error)."""
    if args.get("scope") != "all":
        return ()
    if isinstance(sid := args.get("session_id"), str) and sid:
        try:
            record = store.get_session(sid)
        except sqlite3.Error:  # judged as the wider read; the call itself reports the failure
            record = None
        if record is not None and record.cwd == str(cwd):
            return ()
    return (str(store.path),)


def _discover(store: Store, hits: list[Hit], limit: int, sort: str) -> list[dict[str, Any]]:
    best: dict[str, Hit] = {}
    matches: dict[str, int] = {}
    for hit in hits:  # best first: the first hit of a session is its best
        best.setdefault(hit.session_id, hit)
        matches[hit.session_id] = matches.get(hit.session_id, 0) + 1
    records = {sid: store.get_session(sid) for sid in best}
    order = [sid for sid in best if records[sid] is not None]
    if sort == "newest":
        order.sort(key=lambda sid: -records[sid].updated_at)  # type: ignore[union-attr]
    elif sort == "oldest":
        order.sort(key=lambda sid: records[sid].created_at)  # type: ignore[union-attr]
    out = []
    for sid in order[:limit]:
        hit, record = best[sid], records[sid]
        assert record is not None
        window = store.around(sid, hit.seq, HIT_WINDOW)
        words = quoted_words(store.withheld_texts(sid))
        out.append({**_about(record), "snippet": redact_text(scrub(hit.snippet, words)),
                    "match_message_id": hit.seq, "matches": matches[sid],
                    "messages": [_shown(n, m, words) for n, m in window if _visible(m)]})
    return out


def _scroll(store: Store, args: dict[str, Any], project: str | None) -> dict[str, Any]:
    sid = str(args["session_id"])
    record = store.get_session(sid)
    if record is None:
        raise RecallError(f"no session {sid!r} was saved; use an id from a discovery result")
    if project is not None and record.cwd != project:
        raise RecallError(f"session {sid!r} belongs to another project; pass scope=\"all\" to read it")
    last = store.last_seq(sid)
    if args.get("around_message_id") is None:
        raise RecallError("scroll needs around_message_id (a match_message_id or a message id "
                          f"seen before); session {sid!r} has messages 1 to {last}")
    anchor = _int(args, "around_message_id", 0, -(2**62), 2**62)
    if not 1 <= anchor <= last:
        raise RecallError(f"session {sid!r} has messages 1 to {last}, not {anchor}")
    window = _int(args, "window", DEFAULT_WINDOW, 1, MAX_WINDOW)
    words = quoted_words(store.withheld_texts(sid))
    shown = [_shown(n, m, words) for n, m in store.around(sid, anchor, window) if _visible(m)]
    return {**_about(record), "around_message_id": anchor, "window": window,
            "messages_before": anchor - max(1, anchor - window),
            "messages_after": min(last, anchor + window) - anchor,
            "messages": shown, "first_message_id": 1, "last_message_id": last}


def _recent(store: Store, project: str | None, current: str, limit: int) -> dict[str, Any]:
    records = [r for r in store.list_sessions(cwd=project, limit=limit + 1) if r.id != current]
    return {"scope": "project" if project else "all", "recent": [_about(r) for r in records[:limit]],
            "hint": "pass query to search what was said"}


def _about(record: SessionRecord) -> dict[str, Any]:
    return {"session_id": record.id, "title": record.title or "(untitled)", "cwd": record.cwd,
            "when": datetime.fromtimestamp(record.updated_at, UTC).strftime("%Y-%m-%d %H:%M UTC")}


def _visible(message: dict[str, Any]) -> bool:
    return message.get("role") in ALL_ROLES


def _shown(seq: int, message: dict[str, Any], quoted: frozenset[str]) -> dict[str, Any]:
    if path := message.get(WITHHELD):  # marked when stored: what a secret path held
        text = withheld_note(str(path))
    else:  # and what quotes it
        text = scrub(searchable_text(message) if calls_of(message) else text_of(message, "[image]"), quoted)
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[:MAX_MESSAGE_CHARS] + f" ... [{len(text) - MAX_MESSAGE_CHARS} more characters]"
    shown = {"id": seq, "role": message.get("role"), "content": redact_text(text)}
    if is_tool_result(message) and message.get("name"):
        shown["tool"] = message["name"]
    return shown


def _roles(value: Any) -> tuple[str, ...]:
    if value in (None, ""):
        return DEFAULT_ROLES
    roles = tuple(r.strip() for r in str(value).split(",") if r.strip())
    unknown = [r for r in roles if r not in ALL_ROLES]
    if unknown or not roles:
        raise RecallError(f"role_filter takes {', '.join(ALL_ROLES)} (comma-separated), not {value!r}")
    return roles


def _choice(args: dict[str, Any], name: str, allowed: tuple[str, ...], default: str) -> str:
    value = args.get(name) or default
    if value not in allowed:
        raise RecallError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    return str(value)


def _int(args: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = args.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise RecallError(f"{name} must be a whole number, not {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise RecallError(f"{name} must be a whole number, not {value!r}") from None
    return max(low, min(high, number))
