"""Self-contained HTML pages of trajectories: one file, inline CSS and SVG, no JavaScript.

    render_trajectory(traj)              one run: summary, token and tool charts, then the
                                         turns, with reasoning and every tool call's arguments
                                         and output in collapsible <details>

The batch page (Hermes `data/NAME/` or a many-line ShareGPT JSONL) is `talaria.agent.trajectories.report`.

Everything shown is redacted (`talaria.tools.redact`) and escaped; long texts are capped at
`TEXT_LIMIT` characters.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from typing import Any

from talaria.agent.events import figures
from talaria.agent.trajectories import charts
from talaria.agent.trajectories.model import Trajectory, TurnUsage, iso_time, tool_failed
from talaria.agent.transcript import (
    Message,
    calls_of,
    is_assistant,
    is_system,
    is_tool_result,
    is_user,
    results_by_call,
    text_of,
)
from talaria.tools.redact import redact

TEXT_LIMIT = 20_000
PREVIEW_CHARS = 90

CSS = """
*{box-sizing:border-box}body{margin:0;background:#f4f6f9;color:#1d2630;
font:14px/1.5 -apple-system,BlinkMacSystemFont,"Segoe UI",Roboto,Helvetica,Arial,sans-serif}
main{max-width:1080px;margin:0 auto;padding:28px 24px 60px}
h1{font-size:22px;margin:0 0 6px}h2{font-size:16px;margin:30px 0 10px;color:#3a4652}
.meta{color:#5d6b79;font-size:13px}.meta code{font-size:12px}
.badge{display:inline-block;padding:2px 10px;border-radius:10px;font-size:12px;font-weight:600;
vertical-align:middle;margin-left:8px}.badge.completed{background:#dcf3e7;color:#1f7a4f}
.badge.partial{background:#fbedd3;color:#8a5a00}
.tiles{display:grid;grid-template-columns:repeat(auto-fill,minmax(150px,1fr));gap:10px;margin:18px 0}
.tile{background:#fff;border:1px solid #e1e6ec;border-radius:8px;padding:10px 14px}
.tile b{display:block;font-size:20px}.tile span{color:#5d6b79;font-size:12px}
.card{background:#fff;border:1px solid #e1e6ec;border-radius:8px;padding:14px 16px;margin:10px 0;
overflow-x:auto}.charts{display:grid;grid-template-columns:1fr 1fr;gap:12px}
.chart{max-width:100%;height:auto;display:block}
.chart .label,.chart .value,.chart .axis{font:12px sans-serif;fill:#3a4652}.chart .axis{fill:#7a8794}
.legend{font-size:12px;color:#5d6b79;margin:2px 0 8px}.legend span{margin-right:14px}
.legend i{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px}
.msg{background:#fff;border:1px solid #e1e6ec;border-radius:8px;margin:12px 0;padding:12px 16px}
.msg.user{border-left:4px solid #3b6fd8}.msg.agent{border-left:4px solid #8a63d2}
.msg.system{border-left:4px solid #9aa3ad}.who{font-size:12px;font-weight:600;color:#5d6b79;
margin-bottom:6px;display:flex;justify-content:space-between;gap:12px}.who .usage{font-weight:400}
.text{white-space:pre-wrap;word-wrap:break-word}.text:empty{display:none}
details{margin:6px 0}summary{cursor:pointer;padding:5px 8px;border-radius:6px;list-style-position:inside}
details.thinking>summary{color:#6b5a99;font-style:italic}
details.thinking>div{color:#4d4566;background:#f7f4fc;border-radius:6px;padding:8px 12px;white-space:pre-wrap}
details.tool{border:1px solid #e1e6ec;border-radius:6px}details.tool>summary{background:#f7f9fb}
details.tool.failed{border-color:#f0c4c4}details.tool.failed>summary{background:#fdf1f1}
details.tool.partial{border-color:#f0dcb4}details.tool.partial>summary{background:#fdf6e9}
details.tool>div{padding:6px 12px 10px}summary .st{float:right;font-size:12px}
.ok{color:#2f9e6b}.bad{color:#d64545}.warn{color:#b07800}summary code{color:#3a4652}
.error{color:#d64545;font-size:12px;white-space:pre-wrap}
pre{background:#f6f8fa;border:1px solid #e8ecf0;border-radius:6px;padding:8px 10px;margin:4px 0;
white-space:pre-wrap;word-wrap:break-word;font:12px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;
max-height:420px;overflow:auto}h4{margin:8px 0 2px;font-size:12px;color:#5d6b79}
img.shot{max-width:320px;max-height:240px;border:1px solid #d5dbe2;border-radius:4px;margin:6px 6px 0 0;
image-rendering:pixelated;min-width:64px}.event{text-align:center;color:#6b7785;font-size:13px;margin:18px 0}
.event>div{display:inline-block;background:#eef1f5;border-radius:14px;padding:4px 14px}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{text-align:left;padding:5px 8px;
border-bottom:1px solid #edf0f3}th{color:#5d6b79;font-weight:600}td.n,th.n{text-align:right}
.empty{color:#7a8794}@media(max-width:800px){.charts{grid-template-columns:1fr}}
"""


def page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{escape(title)}</title><style>{CSS}</style></head>"
            f"<body><main>{body}</main></body></html>\n")


def render_trajectory(traj: Trajectory) -> str:
    messages: list[Message] = redact(list(traj.messages))
    title = traj.title or _first_prompt(messages) or traj.session_id
    totals = traj.totals()
    calls = sum(s["count"] for s in traj.tool_stats.values())
    failed = sum(s["failure"] for s in traj.tool_stats.values())
    started = iso_time(traj.created_at or next((t for t in traj.times if t), None))
    meta = " · ".join(escape(str(part)) for part in (
        f"session {traj.session_id}", traj.model or "model unknown", started, traj.cwd) if part)
    body = [f'<h1>{escape(clip(title, 120))}<span class="badge {traj.status}">{traj.status}'
            f'</span></h1><div class="meta">{meta}</div><div class="tiles">',
            tile(traj.api_calls, "model calls"),
            tile(calls, f"tool calls · {failed} failed" if failed else "tool calls"),
            tile(f"{totals['input_tokens']:,}", f"input tokens · {totals['cache_read_tokens']:,} cached"),
            tile(f"{totals['output_tokens']:,}", f"output tokens · {totals['reasoning_tokens']:,} reasoning"),
            tile(f"{traj.duration_ms() / 1000:,.1f} s", "model time"),
            tile(len(traj.compactions), "compactions"), "</div>"]
    if traj.turns:
        body.append('<h2>Tokens per model call</h2><div class="charts"><div class="card">'
                    + charts.legend([("input", charts.BLUE), ("cached input", charts.LIGHT_BLUE)])
                    + charts.columns(_context_rows(traj.turns), width=500, title="Input tokens")
                    + '</div><div class="card">'
                    + charts.legend([("output", charts.AMBER), ("of which reasoning", charts.GREY)])
                    + charts.columns(_output_rows(traj.turns), width=500, title="Output tokens")
                    + "</div></div>")
    if traj.tool_stats:
        rows, labels = _tool_rows(traj.tool_stats)
        keys = [("succeeded", charts.OK), ("failed", charts.FAIL), ("no result", charts.GREY)]
        body.append("<h2>Tools</h2><div class=\"card\">" + charts.legend(keys)
                    + charts.hbars(rows, totals=labels, width=760, title="Tool calls") + "</div>")
    body.append("<h2>Transcript</h2>")
    body.append(transcript_html(traj))
    return page(f"{title} — Talaria trajectory", "".join(body))


def transcript_html(traj: Trajectory) -> str:
    """The turns of a trajectory (redacted): messages, tool calls with their results, events."""
    messages: list[Message] = redact(list(traj.messages))
    results = results_by_call(messages)
    called = {c["id"] for m in messages for c in calls_of(m)}
    usage = {t.index: (n, t) for n, t in enumerate(traj.turns, start=1)}
    events: dict[int, list[dict[str, Any]]] = {}
    for event in redact(list(traj.compactions)):
        events.setdefault(event["at"], []).append(event)
    out: list[str] = []
    for i, message in enumerate(messages + [{}]):
        out.extend(_event(e) for e in events.get(i, ()))
        if is_system(message):
            out.append('<div class="msg system"><details><summary>System prompt</summary>'
                       f'<pre>{esc_text(message.get("content"))}</pre></details></div>')
        elif is_user(message):
            out.append(f'<div class="msg user"><div class="who">You</div>{_content(message.get("content"))}</div>')
        elif is_assistant(message):
            out.append(_agent_turn(message, usage.get(i), results))
        elif is_tool_result(message) and message.get("tool_call_id") not in called:
            out.append(f'<div class="msg agent">{_tool(message.get("name", "?"), None, message)}</div>')
    return "".join(out)


def _agent_turn(message: Message, usage: tuple[int, TurnUsage] | None,
                results: dict[Any, Message]) -> str:
    number, turn = usage if usage else (0, None)
    label = f"Turn {number}" if number else "Assistant"
    facts = []
    if turn is not None and turn.model:
        facts.append(escape(turn.model))
    if turn is not None and "usage" in message:
        cached = f" ({turn.cache_read_tokens:,} cached)" if turn.cache_read_tokens else ""
        facts += [f"{turn.input_tokens:,} in{cached}", f"{turn.output_tokens:,} out"]
    if turn is not None and turn.duration_ms:
        facts.append(f"{turn.duration_ms / 1000:.1f} s")
    if message.get("interrupted"):
        facts.append('<span class="bad">interrupted</span>')
    stats = " · ".join(facts)
    parts = [f'<div class="msg agent"><div class="who"><span>{label}</span>'
             f'<span class="usage">{stats}</span></div>']
    if message.get("reasoning"):
        parts.append(f'<details class="thinking"><summary>Thinking</summary>'
                     f'<div>{esc_text(message["reasoning"])}</div></details>')
    parts.append(f'<div class="text">{esc_text(message.get("content"))}</div>')
    for call in message.get("tool_calls") or ():
        parts.append(_tool(call["name"], call.get("arguments"), results.get(call["id"])))
    parts.append("</div>")
    return "".join(parts)


def _tool(name: str, arguments: Any, result: Message | None) -> str:
    args = _parse(arguments)
    preview = next((v for v in args.values() if isinstance(v, str)), "") if isinstance(args, dict) else ""
    if result is None:
        state, css, mark = "no result", "", '<span class="st">no result</span>'
    elif tool_failed(result):
        state, css, mark = "failed", " failed", '<span class="st bad">✗ failed</span>'
    else:
        state, css, mark = "completed", "", '<span class="st ok">✓ completed</span>'
    body = ""
    if arguments is not None:
        shown = args if isinstance(args, str) else _json(args)
        body += f"<h4>Arguments</h4><pre>{esc_text(shown)}</pre>"
    if result is not None:
        body += _result(result.get("content"))
    # Failed calls start open: they are what a reader of a trajectory looks for first.
    return (f'<details class="tool{css}"{" open" if css else ""} title="{state}"><summary><b>{escape(name)}</b> '
            f'<code>{escape(clip(preview.replace(chr(10), " "), PREVIEW_CHARS))}</code>{mark}'
            f"</summary><div>{body}</div></details>")


def _result(content: Any) -> str:
    images = ""
    if isinstance(content, list):
        images = "".join(_image(p) for p in content if p.get("type") == "image")
        content = "\n".join(p.get("text", "") for p in content if p.get("type") == "text")
    data = _parse(content)
    blocks = []
    if isinstance(data, dict):
        for key in ("error", "output", "content"):
            if isinstance(data.get(key), str):
                blocks.append(f"<h4>{key}</h4><pre>{esc_text(data[key])}</pre>")
                data = {k: v for k, v in data.items() if k != key}
        if data:
            blocks.append(f"<h4>result</h4><pre>{esc_text(_json(data))}</pre>")
    else:
        blocks.append(f"<h4>result</h4><pre>{esc_text(content)}</pre>")
    return "".join(blocks) + images


def _event(event: dict[str, Any]) -> str:
    applied = "" if event.get("applied", True) else " — not applied"
    before, after = figures(event)
    line = (f"⟲ Context compacted ({escape(str(event.get('reason', 'auto')))}, stage "
            f"{escape(str(event.get('stage', '?')))}): {before} → {after} tokens{applied}")
    summary = ""
    if event.get("summary"):
        summary = (f'<details><summary>Summary</summary><pre style="text-align:left">'
                   f'{esc_text(event["summary"])}</pre></details>')
    return f'<div class="event"><div>{line}</div>{summary}</div>'


def _content(content: Any) -> str:
    if not isinstance(content, list):
        return f'<div class="text">{esc_text(content)}</div>'
    text = "\n".join(p.get("text", "") for p in content if p.get("type") == "text")
    return f'<div class="text">{esc_text(text)}</div>' + "".join(
        _image(p) for p in content if p.get("type") == "image")


def _image(part: dict[str, Any]) -> str:
    mime = part.get("mime_type") or "image/png"
    if not mime.startswith("image/") or "\"" in mime:
        return ""
    return f'<img class="shot" alt="image" src="data:{escape(mime)};base64,{escape(part.get("data", ""))}">'


def _context_rows(turns: tuple[TurnUsage, ...]) -> Sequence[charts.Row]:
    return [(f"#{n}", [(max(0, t.input_tokens - t.cache_read_tokens), charts.BLUE),
                       (t.cache_read_tokens, charts.LIGHT_BLUE)])
            for n, t in enumerate(turns, start=1)]


def _output_rows(turns: tuple[TurnUsage, ...]) -> Sequence[charts.Row]:
    return [(f"#{n}", [(t.reasoning_tokens, charts.GREY),
                       (max(0, t.output_tokens - t.reasoning_tokens), charts.AMBER)])
            for n, t in enumerate(turns, start=1)]


def _tool_rows(stats: dict[str, dict[str, int]]) -> tuple[Sequence[charts.Row], list[str]]:
    used = sorted(((n, s) for n, s in stats.items() if s.get("count")), key=lambda x: -x[1]["count"])
    rows = [(name, [(s["success"], charts.OK), (s["failure"], charts.FAIL),
                    (max(0, s["count"] - s["success"] - s["failure"]), charts.GREY)])
            for name, s in used]
    totals = [f"{s['count']} · {s['failure']} failed" if s["failure"] else str(s["count"])
              for _, s in used]
    return rows, totals


def tile(value: Any, label: str) -> str:
    return f'<div class="tile"><b>{escape(str(value))}</b><span>{escape(label)}</span></div>'


def _first_prompt(messages: list[Message]) -> str:
    first = next((m for m in messages if is_user(m)), None)
    return " ".join(text_of(first, sep=" ").split()) if first is not None else ""


def esc_text(value: Any) -> str:
    text = value if isinstance(value, str) else "" if value is None else str(value)
    if len(text) > TEXT_LIMIT:
        text = text[:TEXT_LIMIT] + f"\n… ({len(text) - TEXT_LIMIT:,} more characters)"
    return escape(text)


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json(value: Any) -> str:
    """One line when short, indented otherwise."""
    flat = json.dumps(value, ensure_ascii=False)
    return flat if len(flat) <= 100 else json.dumps(value, ensure_ascii=False, indent=2)


def _parse(value: Any) -> Any:
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value if value is not None else {}

