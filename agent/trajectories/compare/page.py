"""The compare page: one self-contained HTML file (inline CSS and SVG, no JavaScript).

    render_compare(data)   data: build.compare_runs' dict (compare.json)

Tiles per comparison (pass@1 of each run, the difference with its interval, McNemar's p), the
paired outcomes and the differences as charts, each run's cost, turns, tokens and time per
solve, tool usage side by side, then the tasks one run solved and the other did not, and
every shared task's pass@1 per run (the first PER_TASK_LIMIT; all are in compare.json).
"""

from __future__ import annotations

from html import escape
from typing import Any

from talaria.agent.trajectories import charts
from talaria.agent.trajectories.view import page, tile

PER_TASK_LIMIT = 500
RUN_COLOURS = (charts.BLUE, charts.AMBER, charts.OK, charts.LIGHT_BLUE, charts.FAIL, charts.GREY)
METRIC_NAMES = {"pass_at_1": "pass@1", "solved": "solved (any attempt)", "reward": "mean reward"}
PER_SOLVE = (("cost_usd", "cost ($)"), ("turns", "model calls"), ("tokens", "tokens"),
             ("duration_s", "seconds"))


def _num(value: Any, digits: int = 3) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _money(value: Any) -> str:
    return "–" if value is None else f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def render_compare(data: dict[str, Any]) -> str:
    labels = [r["label"] for r in data["runs"]]
    boot = data["bootstrap"]
    left = [f"{r['label']}: {r['left_out']}" for r in data["runs"] if r["left_out"]]
    body = [f"<h1>Compare: {' vs '.join(escape(label) for label in labels)}</h1>"
            f'<div class="meta">{data["shared_tasks"]} shared task(s) compared'
            + (f" · left out (not checked in every run): {escape(', '.join(left))}" if left else "")
            + f" · bootstrap: {boot['resamples']:,} resamples, seed {boot['seed']}, "
            f"{boot['level']:.0%} interval</div>"]
    for comparison in data["comparisons"]:
        body.append(_tiles(comparison, boot["level"]))
    body.append(_charts(data))
    body.append(_runs_table(data["runs"], data["per_run"]))
    body.append(_per_solve_charts(labels, data["per_run"]))
    body.append(_tools(labels, data["per_run"]))
    body.append(_task_lists(data["comparisons"]))
    body.append(_per_task(labels, data["per_task"]))
    body.append(f'<h2>How outcomes are paired</h2><p class="meta">{escape(data["pairing"])}</p>')
    return page(f"Compare {' vs '.join(labels)} — Talaria", "".join(body))


def _tiles(comparison: dict[str, Any], level: float) -> str:
    a, b = comparison["a"], comparison["b"]
    d = comparison["difference"]["pass_at_1"]
    test = comparison["mcnemar"]
    counts = comparison["counts"]
    return (f"<h2>{escape(b)} against {escape(a)}</h2><div class=\"tiles\">"
            + tile(_num(d["a"]), f"pass@1 · {a}") + tile(_num(d["b"]), f"pass@1 · {b}")
            + tile(f"{d['diff']:+.3f}", f"difference, {level:.0%} CI [{d['ci'][0]:+.3f}, "
                   f"{d['ci'][1]:+.3f}]")
            + tile(_num(test["p_value"], 4), f"McNemar p ({test['method']}; "
                   f"{test['b']} vs {test['c']} discordant)")
            + tile(f"{counts['b_only']} / {counts['a_only']}", f"solved only by {b} / only by {a}")
            + tile(f"{counts['both']} / {counts['neither']}", "solved by both / by neither")
            + "</div>")


def _charts(data: dict[str, Any]) -> str:
    outcome_rows, diff_rows = [], []
    for c in data["comparisons"]:
        n = c["counts"]
        outcome_rows.append((f"{c['b']} vs {c['a']}",
                             [(n["both"], charts.OK), (n["b_only"], charts.AMBER),
                              (n["a_only"], charts.BLUE), (n["neither"], charts.GREY)]))
        for metric, d in c["difference"].items():
            diff_rows.append((f"{c['b']} − {c['a']}: {METRIC_NAMES[metric]}",
                              d["diff"], d["ci"][0], d["ci"][1]))
    level = data["bootstrap"]["level"]
    return ('<h2>Outcomes</h2><div class="card"><b>Paired outcomes per task</b>'
            + charts.legend([("both", charts.OK), ("second run only", charts.AMBER),
                             ("baseline only", charts.BLUE), ("neither", charts.GREY)])
            + charts.hbars(outcome_rows, label_width=190, unit=" tasks", title="Paired outcomes")
            + f'</div><div class="card"><b>Differences with their {level:.0%} bootstrap '
            'interval</b>' + charts.legend([("better", charts.OK), ("worse", charts.FAIL),
                                            ("interval holds 0", charts.GREY)])
            + charts.intervals(diff_rows, title="Differences") + "</div>")


def _runs_table(runs: list[dict[str, Any]], per_run: dict[str, dict[str, Any]]) -> str:
    rows = []
    for run in runs:
        s = per_run[run["label"]]
        when = s["when_solved"]
        rows.append(
            f"<tr><td>{escape(run['label'])}<div class=\"meta\">"
            f"{escape(', '.join(run['agents']))} · {escape(', '.join(run['models']))} · "
            f"{escape(', '.join(run['toolsets']))}</div></td>"
            f"<td class=\"n\">{s['tasks']}</td><td class=\"n\">{s['attempts']}</td>"
            f"<td class=\"n\">{_num(s['pass_at_1'])}</td><td class=\"n\">{_num(s['solved'])}</td>"
            f"<td class=\"n\">{_num(s['reward'])}</td>"
            f"<td class=\"n\">{_money(s['cost_usd']['per_solve'])}</td>"
            f"<td class=\"n\">{_num(s['turns']['per_solve'], 1)}</td>"
            f"<td class=\"n\">{_num(s['tokens']['per_solve'], 0)}</td>"
            f"<td class=\"n\">{_num(s['duration_s']['per_solve'], 1)}</td>"
            f"<td class=\"n\">{_money(when['cost_usd'])} · {_num(when['turns'], 1)} · "
            f"{_num(when['tokens'], 0)} · {_num(when['duration_s'], 1)} s</td></tr>")
    return ('<h2>Runs</h2><div class="card"><table><tr><th>run</th><th class="n">tasks</th>'
            '<th class="n">attempts</th><th class="n">pass@1</th><th class="n">solved</th>'
            '<th class="n">reward</th><th class="n">cost / solve</th><th class="n">turns / solve</th>'
            '<th class="n">tokens / solve</th><th class="n">s / solve</th>'
            '<th class="n">a solve, on tasks all runs solved</th></tr>'
            f"{''.join(rows)}</table><p class=\"meta\">Per solve: everything the run spent on "
            "these tasks, failed attempts included, over its resolved attempts. The last "
            "column: the mean resolved attempt on the tasks every run solved (cost · turns · "
            "tokens · time).</p></div>")


def _per_solve_charts(labels: list[str], per_run: dict[str, dict[str, Any]]) -> str:
    cards = []
    for key, name in PER_SOLVE:
        rows = [(label, [(per_run[label][key]["per_solve"] or 0.0, RUN_COLOURS[i % len(RUN_COLOURS)])])
                for i, label in enumerate(labels)]
        shown = [_money(per_run[lb][key]["per_solve"]) if key == "cost_usd"
                 else _num(per_run[lb][key]["per_solve"], 1) for lb in labels]
        cards.append(f'<div class="card"><b>{escape(name)} per solve</b>'
                     + charts.hbars(rows, width=500, label_width=140, totals=shown,
                                    title=f"{name} per solve") + "</div>")
    return '<h2>Per solve</h2><div class="charts">' + "".join(cards) + "</div>"


def _tools(labels: list[str], per_run: dict[str, dict[str, Any]]) -> str:
    names = sorted({n for lb in labels for n in per_run[lb]["tools"]},
                   key=lambda n: -sum(per_run[lb]["tools"].get(n, {}).get("calls", 0) for lb in labels))
    if not names:
        return '<h2>Tools</h2><p class="empty">No tool calls in these runs.</p>'
    head = "".join(f'<th class="n">{escape(lb)}: calls / attempt</th><th class="n">failed</th>'
                   for lb in labels)
    rows, bars = [], []
    for name in names:
        cells = ""
        for i, label in enumerate(labels):
            t = per_run[label]["tools"].get(name) or {}
            cells += (f"<td class=\"n\">{_num(t.get('per_attempt'), 2)}</td>"
                      f"<td class=\"n\">{t.get('failed', 0)} of {t.get('calls', 0)}</td>")
            bars.append((f"{name} · {label}",
                         [(t.get("per_attempt") or 0.0, RUN_COLOURS[i % len(RUN_COLOURS)])]))
        rows.append(f"<tr><td>{escape(name)}</td>{cells}</tr>")
    key = [(lb, RUN_COLOURS[i % len(RUN_COLOURS)]) for i, lb in enumerate(labels)]
    return ('<h2>Tools</h2><div class="card"><b>Calls per attempt</b>' + charts.legend(key)
            + charts.hbars(bars, label_width=220, title="Tool calls per attempt")
            + f'</div><div class="card"><table><tr><th>tool</th>{head}</tr>{"".join(rows)}'
            "</table></div>")


def _task_lists(comparisons: list[dict[str, Any]]) -> str:
    out = ["<h2>Tasks solved by one run only</h2>"]
    for c in comparisons:
        for key, who in (("b_only", c["b"]), ("a_only", c["a"])):
            ids = c["outcomes"][key]
            shown = ", ".join(ids[:PER_TASK_LIMIT]) + (
                f" … and {len(ids) - PER_TASK_LIMIT} more" if len(ids) > PER_TASK_LIMIT else "")
            out.append(f"<details><summary>only {escape(who)} ({escape(c['b'])} vs {escape(c['a'])}): "
                       f"{len(ids)} task(s)</summary><pre>{escape(shown) or '–'}</pre></details>")
    return "".join(out)


def _per_task(labels: list[str], per_task: dict[str, dict[str, float]]) -> str:
    rows = []
    for task, values in list(per_task.items())[:PER_TASK_LIMIT]:
        differs = len({values[lb] for lb in labels}) > 1
        cells = "".join(f'<td class="n">{_num(values[lb])}</td>' for lb in labels)
        rows.append(f"<tr><td>{'<b>' if differs else ''}{escape(task)}"
                    f"{'</b>' if differs else ''}</td>{cells}</tr>")
    more = (f'<p class="empty">… {len(per_task) - PER_TASK_LIMIT} more in the JSON file.</p>'
            if len(per_task) > PER_TASK_LIMIT else "")
    head = "".join(f'<th class="n">{escape(lb)}</th>' for lb in labels)
    return ('<h2>Per task (pass@1; bold: the runs differ)</h2><div class="card"><table><tr>'
            f"<th>task</th>{head}</tr>{''.join(rows)}</table>{more}</div>")
