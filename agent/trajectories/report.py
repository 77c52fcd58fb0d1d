"""The statistics page of a batch run: many trajectories on one self-contained page.

    is_batch(path)                       a run dir (trajectories.jsonl, optional
                                         statistics.json) or a JSONL of more than one run
    load_batch(path)                     (entries, statistics or None, title)
    render_batch(entries, stats, title)  tiles, then SVG charts (tool usage, success rate per
                                         tool, turns and tokens per task), the verifier's
                                         figures (verdict_view.py: pass@k, cost, breakdowns),
                                         the toolset mix, the tool-call sequences before
                                         success and the repeated errors (patterns_view.py),
                                         then a table (each attempt's verdict and error) and
                                         the first `BATCH_DETAIL_LIMIT` conversations, each
                                         with its error and the check's output

Two line shapes are read: ShareGPT lines (`conversations`, `tool_stats` with
count/success/failure: Hermes', Talaria's `export --format sharegpt`, and Talaria's batch
lines, which add `task_id`, `status`, `reason`, `tokens`: see batch/records.py) and bare
records with `messages`. A task is labelled by its `task_id` when the line has one, else by
`#prompt_index` (its position in the dataset); the table shows both.
Token counts come from the line (`metadata.usage` or `tokens`); ShareGPT lines without them
(Hermes' own) get an offline cl100k estimate of their text, shown as such.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from talaria.agent.trajectories import charts, patterns_view, verdict_view
from talaria.agent.trajectories.lines import trajectory_lines
from talaria.agent.trajectories.view import clip, esc_text, page, tile, transcript_html
from talaria.tools.redact import redact

BATCH_DETAIL_LIMIT = 100


@dataclass(frozen=True, slots=True)
class Task:
    label: str
    """The task id, or `#prompt_index` for lines without one."""
    index: int
    """The line's `prompt_index` (the task's 0-based position in its dataset), else its
    position in the file."""
    prompt: str
    completed: bool
    state: str
    """completed, partial, or failed (reason) for Talaria batch records."""
    api_calls: int
    tool_calls: int
    failures: int
    input_tokens: int
    output_tokens: int
    estimated: bool
    error: str = ""
    """Why a failed task failed (a batch line's `error`), else empty."""


def is_batch(path: Path) -> bool:
    if path.is_dir():
        return (path / "trajectories.jsonl").is_file()
    with path.open(encoding="utf-8") as lines:
        first, second = next(lines, ""), next(lines, "")
    run_line = '"conversations"' in first or ('"messages"' in first and '"task_id"' in first)
    return run_line and bool(second.strip())


def load_batch(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any] | None, str]:
    jsonl = path / "trajectories.jsonl" if path.is_dir() else path
    stats_file = jsonl.parent / "statistics.json"
    stats = _json_file(stats_file) or None
    entries = trajectory_lines(jsonl, "no page was written")  # as export reads them
    return entries, stats, _title(path, jsonl, stats)


def _title(path: Path, jsonl: Path, stats: dict[str, Any] | None) -> str:
    """The run's name: statistics.json or checkpoint.json say it; a run directory's
    trajectories.jsonl is named by its directory, another file by its name."""
    for data in (stats or {}, _json_file(jsonl.parent / "checkpoint.json")):
        if isinstance(data.get("run_name"), str) and data["run_name"]:
            return str(data["run_name"])
    if path.is_dir() or jsonl.name == "trajectories.jsonl":
        return jsonl.parent.resolve().name
    return path.stem


def _json_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def summarize(position: int, entry: dict[str, Any]) -> Task:
    if "conversations" not in entry:
        return _summarize_record(position, entry)
    turns = entry["conversations"]
    # A task that failed before its first model call has no human turn: its line's prompt.
    prompt = next((t.get("value", "") for t in turns if t.get("from") == "human"),
                  entry.get("prompt") or "")
    tool_stats = entry.get("tool_stats") or {}
    usage = (entry.get("metadata") or {}).get("usage")
    if isinstance(usage, dict):
        tokens_in, tokens_out, estimated = usage.get("input_tokens", 0), usage.get("output_tokens", 0), False
    else:
        from talaria.agent.context.tokens import count

        tokens_in = sum(count(t.get("value") or "") for t in turns if t.get("from") != "gpt")
        tokens_out = sum(count(t.get("value") or "") for t in turns if t.get("from") == "gpt")
        estimated = True
    index = entry.get("prompt_index")
    index = index if isinstance(index, int) else position
    task_id = entry.get("task_id")
    # A batch line carries its prompt: a task that failed before its first turn has no
    # conversation to take it from.
    prompt = entry.get("prompt") or prompt
    return Task(
        label=_label(entry, str(task_id) if task_id is not None else f"#{index}"), index=index,
        prompt=" ".join(str(prompt).split()),
        completed=bool(entry.get("completed")),
        state=_state(entry) if "status" in entry else
        "completed" if entry.get("completed") else "partial",
        api_calls=entry.get("api_calls") or sum(t.get("from") == "gpt" for t in turns),
        tool_calls=sum(s.get("count", 0) for s in tool_stats.values()),
        failures=sum(s.get("failure", 0) for s in tool_stats.values()),
        input_tokens=tokens_in, output_tokens=tokens_out, estimated=estimated,
        error=_error(entry),
    )


def _summarize_record(position: int, record: dict[str, Any]) -> Task:
    """A Talaria batch record (`agent/batch/records.py`)."""
    tools = _counts(record.get("tool_stats") or {})
    tokens = record.get("tokens") or {}
    index = record.get("prompt_index")
    index = index if isinstance(index, int) else position
    return Task(
        label=_label(record, str(record.get("task_id") or f"#{index}")), index=index,
        prompt=" ".join(str(record.get("prompt") or "").split()),
        completed=record.get("status") == "completed",
        state=_state(record),
        api_calls=int(record.get("turns") or 0),
        tool_calls=sum(s["count"] for s in tools.values()),
        failures=sum(s["failure"] for s in tools.values()),
        input_tokens=int(tokens.get("input") or 0), output_tokens=int(tokens.get("output") or 0),
        estimated=False, error=_error(record),
    )


def _error(record: dict[str, Any]) -> str:
    error = record.get("error") if record.get("status") != "completed" else None
    return " ".join(str(error).split()) if error else ""


def _label(entry: dict[str, Any], name: str) -> str:
    attempt = entry.get("attempt")
    return f"{name} #{attempt}" if isinstance(attempt, int) and attempt > 1 else name


def _state(record: dict[str, Any]) -> str:
    """completed, or "failed (reason)" for a Talaria batch line or record."""
    if record.get("status") == "completed":
        return "completed"
    return f"{record.get('status') or 'failed'} ({record.get('reason') or '?'})"


def _counts(stats: dict[str, dict[str, Any]]) -> dict[str, dict[str, int]]:
    """{tool: {count, success, failure}} from either shape of per-tool counts."""
    out = {}
    for name, s in stats.items():
        if "calls" in s:  # Talaria batch: calls / failed
            calls, failed = int(s.get("calls") or 0), int(s.get("failed") or 0)
            out[name] = {"count": calls, "success": calls - failed, "failure": failed}
        else:
            out[name] = {k: int(s.get(k) or 0) for k in ("count", "success", "failure")}
    return out


def tool_totals(entries: list[dict[str, Any]], stats: dict[str, Any] | None) -> dict[str, dict[str, int]]:
    """Per-tool totals: the run's statistics.json when it has them, else summed over lines."""
    for key in ("tool_statistics", "tools"):  # Hermes, Talaria
        if stats and isinstance(stats.get(key), dict):
            return _counts(stats[key])
    totals: dict[str, dict[str, int]] = {}
    for entry in entries:
        for name, s in _counts(entry.get("tool_stats") or {}).items():
            t = totals.setdefault(name, {"count": 0, "success": 0, "failure": 0})
            for key in t:
                t[key] += s[key]
    return totals


def render_batch(entries: list[dict[str, Any]], stats: dict[str, Any] | None, title: str) -> str:
    entries = redact(entries)
    tasks = [summarize(i, e) for i, e in enumerate(entries)]
    # Lines are written as tasks finish; charts, table and conversations follow the tasks file.
    order = sorted(range(len(tasks)), key=lambda i: tasks[i].index)
    entries, tasks = [entries[i] for i in order], [tasks[i] for i in order]
    tools = {n: s for n, s in tool_totals(entries, stats).items() if s.get("count")}
    done = sum(t.completed for t in tasks)
    calls = sum(s["count"] for s in tools.values())
    ok = sum(s["success"] for s in tools.values())
    answered = ok + sum(s["failure"] for s in tools.values())
    models = sorted({str(e.get("model") or (e.get("metadata") or {}).get("model")) for e in entries}
                    - {"None"})
    stats = stats or {}
    meta = [f"{len(tasks)} trajectories", stats.get("model") or ", ".join(models)]
    wall = stats.get("duration_seconds", (stats.get("run") or {}).get("wall_s"))
    if isinstance(wall, int | float):
        meta.append(f"{wall:,.0f} s")
    if stats.get("completed_at"):
        meta.append(str(stats["completed_at"]))
    estimated = any(t.estimated for t in tasks)
    body = [f"<h1>Batch: {escape(title)}</h1><div class=\"meta\">"
            + " · ".join(escape(m) for m in meta if m) + '</div><div class="tiles">',
            tile(len(tasks), "trajectories"),
            tile(f"{done / len(tasks):.0%}" if tasks else "–", f"completed · {len(tasks) - done} not completed"),
            tile(f"{sum(t.api_calls for t in tasks):,}", "model calls"),
            tile(f"{calls:,}", "tool calls"),
            tile(f"{ok / answered:.0%}" if answered else "–", "tool calls succeeded"),
            tile(f"{sum(t.api_calls for t in tasks) / len(tasks):.1f}" if tasks else "–", "turns per task"),
            tile(f"{sum(t.input_tokens + t.output_tokens for t in tasks):,}",
                  "tokens (some estimated)" if estimated else "tokens")]
    reasoning = stats.get("reasoning_statistics") or {}
    if reasoning.get("total_assistant_turns"):
        share = reasoning.get("turns_with_reasoning", 0) / reasoning["total_assistant_turns"]
        body.append(tile(f"{share:.0%}", "turns with reasoning"))
    verification = stats.get("verification") or {}
    if verification.get("attempts"):
        body.extend(verdict_view.tiles(verification))
    body.append("</div>")
    body.append(_charts(tasks, tools, estimated))
    body.append(verdict_view.section(verification))
    body.append(patterns_view.section(stats))
    body.append(_table(tasks, entries))
    body.append(_details(entries, tasks))
    return page(f"Batch {title} — Talaria trajectories", "".join(body))


def _charts(tasks: list[Task], tools: dict[str, dict[str, int]], estimated: bool) -> str:
    used = sorted(tools.items(), key=lambda x: -x[1]["count"])
    usage = [(n, [(s["success"], charts.OK), (s["failure"], charts.FAIL),
                  (max(0, s["count"] - s["success"] - s["failure"]), charts.GREY)]) for n, s in used]
    rates, totals = [], []
    for name, s in used:
        answered = s["success"] + s["failure"]
        rate = 100 * s["success"] / answered if answered else 0
        colour = charts.OK if rate >= 90 else charts.AMBER if rate >= 50 else charts.FAIL
        rates.append((name, [(rate, colour)]))
        totals.append(f"{rate:.0f}% of {answered}")
    turns = [(t.label, [(t.api_calls, charts.OK if t.completed else charts.AMBER)]) for t in tasks]
    tokens = [(t.label, [(t.input_tokens + t.output_tokens, charts.GREY)] if t.estimated
               else [(t.input_tokens, charts.BLUE), (t.output_tokens, charts.AMBER)]) for t in tasks]
    token_keys = [("input", charts.BLUE), ("output", charts.AMBER)]
    if estimated:
        token_keys.append(("estimated from the text (cl100k)", charts.GREY))
    return (
        '<h2>Tools</h2><div class="charts"><div class="card"><b>Tool usage</b>'
        + charts.legend([("succeeded", charts.OK), ("failed", charts.FAIL), ("no result", charts.GREY)])
        + charts.hbars(usage, width=500, label_width=120, title="Tool usage")
        + '</div><div class="card"><b>Success rate</b>'
        + charts.legend([("≥ 90%", charts.OK), ("≥ 50%", charts.AMBER), ("< 50%", charts.FAIL)])
        + charts.hbars(rates, width=500, label_width=120, max_value=100, totals=totals,
                       title="Success rate per tool")
        + '</div></div><h2>Per task</h2><div class="card"><b>Turns (model calls) per task</b>'
        + charts.legend([("completed", charts.OK), ("not completed", charts.AMBER)])
        + charts.columns(turns, title="Turns per task")
        + '</div><div class="card"><b>Tokens per task</b>'
        + charts.legend(token_keys)
        + charts.columns(tokens, title="Tokens per task") + "</div>"
    )


def _table(tasks: list[Task], entries: list[dict[str, Any]]) -> str:
    checked = any("resolved" in e for e in entries)
    rows = "".join(
        f'<tr><td>{escape(t.label)}</td><td class="n">{t.index}</td>'
        f"<td>{escape(clip(t.prompt, 90))}</td>"
        f"<td><span class={'ok' if t.completed else 'warn'}>{escape(t.state)}</span>"
        f"{_error_html(t.error)}</td>"
        + (f"<td>{verdict_view.verdict_cell(e)}</td>" if checked else "")
        + f'<td class="n">{t.api_calls}</td><td class="n">{t.tool_calls}</td>'
        f'<td class="n">{t.failures}</td><td class="n">{t.input_tokens + t.output_tokens:,}</td></tr>'
        for t, e in zip(tasks, entries, strict=True)
    )
    return ('<h2>Tasks</h2><div class="card"><table><tr><th>task</th><th class="n">#</th>'
            '<th>prompt</th><th>status</th>' + ("<th>verdict</th>" if checked else "")
            + '<th class="n">turns</th><th class="n">tool calls</th><th class="n">failed</th>'
            f'<th class="n">tokens</th></tr>{rows}</table></div>')


def _error_html(error: str, limit: int = 160) -> str:
    return f'<div class="error">{escape(clip(error, limit))}</div>' if error else ""


def _details(entries: list[dict[str, Any]], tasks: list[Task]) -> str:
    from talaria.agent.trajectories.export.sharegpt import parse_sharegpt
    from talaria.agent.trajectories.model import build

    out = ["<h2>Conversations</h2>"]
    for entry, task in list(zip(entries, tasks, strict=True))[:BATCH_DETAIL_LIMIT]:
        try:
            messages = entry["messages"] if "messages" in entry else parse_sharegpt(entry)
            turns = transcript_html(build(messages, None, session_id=task.label))
        except (KeyError, TypeError, ValueError):  # not our shape of ShareGPT: show it raw
            turns = "".join(f'<h4>{escape(str(t.get("from")))}</h4><pre>{esc_text(t.get("value"))}</pre>'
                            for t in entry.get("conversations") or ())
        verdict = f" · {verdict_view.verdict_cell(entry)}" if "resolved" in entry else ""
        out.append(f'<details class="tool{"" if task.completed else " partial"}"><summary><b>{escape(task.label)}</b> '
                   f"{escape(task.state)}{verdict} · {task.api_calls} turns · "
                   f'<span class="meta">{escape(clip(task.prompt, 100))}</span></summary>'
                   f"<div>{_error_html(task.error, 2000)}{verdict_view.verifier_html(entry)}{turns}</div></details>")
    if len(entries) > BATCH_DETAIL_LIMIT:
        out.append(f'<p class="empty">… {len(entries) - BATCH_DETAIL_LIMIT} more not shown.</p>')
    return "".join(out)
