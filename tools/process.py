"""`process`: follow and steer the background processes of `terminal(background=true)`
(Hermes-compatible: list, poll, log, wait, kill, write, submit, close)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import anyio

from talaria.tools.context import ToolContext
from talaria.tools.errors import WorkspaceError
from talaria.tools.registry import Running, tool

if TYPE_CHECKING:  # the table is imported by the session's first background process
    from talaria.tools.processes.table import Entry, ProcessTable

ACTIONS = ("list", "poll", "log", "wait", "kill", "write", "submit", "close")
READS = frozenset({"list", "poll", "log", "wait"})
"""Actions that only read a process's state and output; the others act on it: input (write,
submit, close: what a shell or REPL reading it runs) and signals (kill) are commands."""
POLL_BYTES = 8_000
"""New output `poll` shows at most (the newest); `log` pages the rest."""
LOG_LINES = 200
"""Lines `log` shows by default (the last ones)."""
LOG_MAX_CHARS = 30_000
DEFAULT_WAIT = 180
MAX_WAIT = 600
PREVIEW_CHARS = 200


@tool(
    name="process",
    description=(
        "Manage terminal(background=true) processes: list, poll (status, new output), log "
        "(offset/limit lines), wait (timeout s), kill, write (stdin), submit (data+Enter), "
        "close (EOF)."
    ),
    parameters={
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": list(ACTIONS)},
            "session_id": {"type": "string"},
            "data": {"type": "string"},
            "timeout": {"type": "integer"},
            "offset": {"type": "integer"},
            "limit": {"type": "integer"},
        },
        "required": ["action"],
    },
    kind="execute",
    kind_of=lambda a: "read" if a.get("action") in READS else "execute",
    command_of=lambda a: input_of(a),
    target=lambda a, state: target(a, state),
    title=lambda a: title(a),
)
async def process(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    action = args.get("action")
    if action not in ACTIONS:
        return {"error": f"action must be one of {', '.join(ACTIONS)}, not {action!r}"}
    table = ctx.state.processes
    if action == "list":
        if table is None:
            return {"processes": []}
        for entry in table.entries.values():
            await _refresh(entry)
        return {"processes": [_summary(e) for e in table.entries.values()]}
    name = args.get("session_id")
    if not isinstance(name, str) or not name:
        return {"error": f"session_id is required for {action}"}
    try:
        entry = _table(table).get(name)
    except KeyError as exc:
        return {"error": exc.args[0]}
    await _refresh(entry)
    try:
        return await ACTION_HANDLERS[action](entry, args)
    except WorkspaceError as exc:
        return {"session_id": entry.id, "status": status(entry), "error": str(exc)}


def input_of(args: dict[str, Any]) -> str | None:
    """What a call sends to its process, as the user is shown it and the policy checks it:
    the data for write and submit; `kill` or `close` for the others that act on it."""
    action = args.get("action")
    if action in ("write", "submit"):
        data = args.get("data", "")
        return data if isinstance(data, str) else None
    return None if action in READS else str(action)


def target(args: dict[str, Any], state: Any) -> Running | None:
    """The live process a call acts on (None for reads, and for none that runs)."""
    table, name = getattr(state, "processes", None), args.get("session_id")
    if args.get("action") in READS or table is None or not isinstance(name, str):
        return None
    entry = table.entries.get(name)
    if entry is None or not entry.proc.running:
        return None
    return Running(entry.id, entry.command, entry.confined, entry.readonly)


def title(args: dict[str, Any]) -> str:
    action, name = args.get("action", "process"), args.get("session_id") or "processes"
    data = args.get("data")
    if action in ("write", "submit") and isinstance(data, str):
        flat = " ".join(data.split())
        return f"{str(action).capitalize()} `{flat[:80]}` to {name}"
    return f"{str(action).capitalize()} {name}"


def status(entry: Entry) -> str:
    proc = entry.proc
    if proc.running:
        return "running"
    return "killed" if proc.killed else "exited"


def _table(table: ProcessTable | None) -> ProcessTable:
    if table is None:
        raise KeyError("no background process was started in this session "
                       "(terminal(command, background=true) starts one)")
    return table


async def _refresh(entry: Entry) -> None:
    if entry.proc.running:
        await entry.proc.refresh()


def _summary(entry: Entry) -> dict[str, Any]:
    proc = entry.proc
    out: dict[str, Any] = {
        "session_id": entry.id, "command": entry.command[:200], "status": status(entry),
        "pid": proc.pid, "uptime_seconds": int(time.time() - entry.started),
        "output_preview": proc.log.since(0, PREVIEW_CHARS)[0],
    }
    return out | _ending(entry)


def _ending(entry: Entry) -> dict[str, Any]:
    proc = entry.proc
    if proc.running:
        return {}
    out: dict[str, Any] = {"exit_code": proc.exit_code}
    if proc.signal:
        out["signal"] = proc.signal
    return out


async def _poll(entry: Entry, args: dict[str, Any]) -> dict[str, Any]:
    text, skipped = entry.proc.log.since(entry.polled, POLL_BYTES)
    entry.polled = entry.proc.log.total
    out: dict[str, Any] = {"session_id": entry.id, "status": status(entry), "new_output": text}
    if skipped:
        out["skipped_bytes"] = skipped
        out["note"] = "More was printed since the last poll: process(action='log') pages it all."
    return out | _ending(entry)


async def _log(entry: Entry, args: dict[str, Any]) -> dict[str, Any]:
    log = entry.proc.log
    lines = log.text().splitlines()
    try:
        limit = max(1, int(args.get("limit") or LOG_LINES))
        offset = args.get("offset")
        start = max(0, len(lines) - limit) if offset is None else max(0, int(offset))
    except (TypeError, ValueError):
        return {"error": "offset and limit must be integers (lines)"}
    page = "\n".join(lines[start:start + limit])
    out: dict[str, Any] = {
        "session_id": entry.id, "status": status(entry), "output": page[-LOG_MAX_CHARS:],
        "total_lines": len(lines), "showing": f"lines {start}-{min(start + limit, len(lines))}",
    }
    if log.total > log.saved:
        out["note"] = f"Output past {log.saved:,} bytes was not kept ({log.total - log.saved:,} bytes)."
    entry.polled = log.total
    return out | _ending(entry)


async def _wait(entry: Entry, args: dict[str, Any]) -> dict[str, Any]:
    try:
        timeout = min(max(1, int(args.get("timeout") or DEFAULT_WAIT)), MAX_WAIT)
    except (TypeError, ValueError):
        return {"error": "timeout must be an integer (seconds)"}
    proc = entry.proc
    waited = 0.0
    started = time.monotonic()
    with anyio.move_on_after(timeout):
        while proc.running:
            # The editor's terminals are not pushed: ask again now and then.
            with anyio.move_on_after(1.0):
                await proc.ended.wait()
            await _refresh(entry)
    waited = time.monotonic() - started
    text, skipped = proc.log.since(entry.polled, POLL_BYTES)
    entry.polled = proc.log.total
    out: dict[str, Any] = {"session_id": entry.id, "status": status(entry), "output": text}
    if skipped:
        out["skipped_bytes"] = skipped
    if proc.running:
        out["status"] = "timeout"
        out["note"] = f"Waited {waited:.0f} s; it is still running (output so far above)."
    return out | _ending(entry)


async def _kill(entry: Entry, args: dict[str, Any]) -> dict[str, Any]:
    if not entry.proc.running:
        return {"session_id": entry.id, "status": "already_exited"} | _ending(entry)
    await entry.proc.kill()
    if entry.proc.running:
        return {"session_id": entry.id, "status": "running",
                "note": "The kill was sent; it has not ended yet."}
    return {"session_id": entry.id, "status": "killed"}


async def _write(entry: Entry, args: dict[str, Any], *, enter: bool = False) -> dict[str, Any]:
    data = args.get("data", "")
    if not isinstance(data, str):
        return {"error": "data must be a string"}
    if not entry.proc.running:
        return {"session_id": entry.id, "status": "already_exited",
                "error": "it has ended; its stdin is gone"} | _ending(entry)
    payload = (data + "\n" if enter else data).encode()
    await entry.proc.write(payload)
    return {"session_id": entry.id, "status": "ok", "bytes_written": len(payload)}


async def _submit(entry: Entry, args: dict[str, Any]) -> dict[str, Any]:
    return await _write(entry, args, enter=True)


async def _close(entry: Entry, args: dict[str, Any]) -> dict[str, Any]:
    if not entry.proc.running:
        return {"session_id": entry.id, "status": "already_exited"} | _ending(entry)
    await entry.proc.write(None)
    return {"session_id": entry.id, "status": "ok", "note": "stdin closed (EOF)"}


ACTION_HANDLERS = {"poll": _poll, "log": _log, "wait": _wait, "kill": _kill, "write": _write,
                   "submit": _submit, "close": _close}
