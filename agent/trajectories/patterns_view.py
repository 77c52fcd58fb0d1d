"""The batch page's patterns: the toolset mix's arms, what precedes success, repeated errors.

    section(statistics)    statistics.json's `toolset_mix` (each arm's share, tasks, resolved
                           rate, cost and turns per solve: `verification.by_toolset`),
                           `sequences` (the tool-call n-grams most over-represented among
                           solved and among unsolved attempts) and `tool_errors`

Computed in batch/mix.py and batch/sequences.py; everything is escaped here.
"""

from __future__ import annotations

from html import escape
from typing import Any

from talaria.agent.trajectories import charts


def _num(value: Any, digits: int = 3) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def section(stats: dict[str, Any]) -> str:
    return (_mix(stats.get("toolset_mix") or {}, (stats.get("verification") or {}).get("by_toolset") or {})
            + _sequences(stats.get("sequences") or {}) + _errors(stats.get("tool_errors") or []))


def _mix(mix: dict[str, Any], by_toolset: dict[str, Any]) -> str:
    arms = mix.get("arms") or {}
    if not arms:
        return ""
    rows, bars = [], []
    for label, arm in arms.items():
        s = by_toolset.get(label) or {}
        rate = s.get("resolved_rate")
        rows.append(f"<tr><td>{escape(label)}</td><td class=\"n\">{arm['share']:.0%}</td>"
                    f"<td class=\"n\">{arm['tasks']}</td><td class=\"n\">{s.get('attempts', 0)}</td>"
                    f"<td class=\"n\">{_num(rate)}</td>"
                    f"<td class=\"n\">{_num((s.get('cost_usd') or {}).get('per_solved_task'), 4)}</td>"
                    f"<td class=\"n\">{_num((s.get('turns') or {}).get('per_solved_task'), 1)}</td>"
                    f"<td class=\"meta\">{escape(', '.join(arm['tools']))}</td></tr>")
        bars.append((label, [(100 * (rate or 0.0), charts.OK)]))
    totals = [_num((by_toolset.get(label) or {}).get("resolved_rate")) for label in arms]
    return ('<h2>Toolset mix</h2><div class="card"><p class="meta">'
            f"{escape(str(mix.get('spec')))}, seed {escape(str(mix.get('seed')))}: each task drew "
            "one arm (all its attempts ran with it). Arms ran on different tasks: a difference "
            "between them is a difference of toolset and of task draw.</p>"
            + charts.hbars(bars, width=500, label_width=160, max_value=100, totals=totals,
                           title="Resolved rate per arm")
            + '<table><tr><th>arm</th><th class="n">share</th><th class="n">tasks</th>'
            '<th class="n">attempts</th><th class="n">resolved</th><th class="n">$ / solve</th>'
            f'<th class="n">turns / solve</th><th>tools</th></tr>{"".join(rows)}</table></div>')


def _gram_rows(rows: list[dict[str, Any]]) -> str:
    return "".join(
        f"<tr><td><code>{escape(' → '.join(r['ngram']))}</code></td>"
        f"<td class=\"n\">{r['solved']} ({r['solved_share']:.0%})</td>"
        f"<td class=\"n\">{r['unsolved']} ({r['unsolved_share']:.0%})</td>"
        f"<td class=\"n\">{r['score']:+.2f}</td><td class=\"n\">{r['z']:+.1f}</td></tr>"
        for r in rows)


def _sequences(seq: dict[str, Any]) -> str:
    solved, unsolved = seq.get("solved_trajectories", 0), seq.get("unsolved_trajectories", 0)
    if not solved and not unsolved:
        return ""
    head = (f'<h2>What precedes success</h2><div class="card"><p class="meta">Tool-call '
            f"sequences (1 to 3 tool names in call order) of {solved} solved and {unsolved} "
            f"unsolved attempts, each counted once per attempt, listed when at least "
            f"{seq.get('min_support')} attempts hold them. Score: {escape(str(seq.get('score')))}.</p>")
    if not solved or not unsolved:
        return head + '<p class="empty">Every checked attempt had the same verdict: nothing to ' \
                      "tell apart.</p></div>"
    table = ('<table><tr><th>{}</th><th class="n">solved</th><th class="n">unsolved</th>'
             '<th class="n">score</th><th class="n">z</th></tr>{}</table>')
    parts = [head]
    for key, title in (("solved", "more common in solved attempts"),
                       ("unsolved", "more common in unsolved attempts")):
        rows = seq.get(key) or []
        parts.append(table.format(escape(title), _gram_rows(rows)) if rows else
                     f'<p class="empty">No sequence {escape(title)} (with enough support).</p>')
    return "".join(parts) + "</div>"


def _errors(errors: list[dict[str, Any]]) -> str:
    if not errors:
        return ""
    rows = "".join(
        f"<tr><td>{escape(e['tool'])}</td><td><code>{escape(e['message'])}</code>"
        f"<div class=\"meta\">e.g. in {escape(str(e['task_id']))}: {escape(e['example'])}</div></td>"
        f"<td class=\"n\">{e['count']}</td><td class=\"n\">{e['trajectories']}</td></tr>"
        for e in errors)
    return ('<h2>Tool errors that repeat</h2><div class="card"><p class="meta">Grouped by tool '
            "and message with ids, paths and numbers replaced.</p><table><tr><th>tool</th>"
            '<th>message</th><th class="n">times</th><th class="n">attempts</th></tr>'
            f"{rows}</table></div>")
