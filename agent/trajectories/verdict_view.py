"""The verifier's part of a batch page: what was solved, how reliably, at what cost.

    tiles(verification)            resolved rate, pass@k, cost (per attempt, per solve)
    section(verification)          pass@k, breakdowns per model / toolset / tag, each task's
                                   attempts (pass@1, pass@k, reward mean ± sample std)
    verdict_cell(entry)            one line's verdict for the tasks table
    verifier_html(entry)           its error, the check's output tail, failing test names

`verification` is statistics.json's section (batch/verdicts.py); lines are batch lines
(batch/records.py). Everything is escaped here; the caller redacts.
"""

from __future__ import annotations

from html import escape
from typing import Any

from talaria.agent.trajectories.view import esc_text, tile

PER_TASK_LIMIT = 500
"""Tasks listed in the attempts table (all of them are in statistics.json)."""
MAX_TEST_NAMES = 30


def _num(value: Any, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _money(value: Any) -> str:
    return "–" if value is None else f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def tiles(verification: dict[str, Any]) -> list[str]:
    rate = verification.get("resolved_rate")
    pass_at = verification.get("pass_at") or {}
    cost = verification.get("cost_usd") or {}
    out = [tile(f"{rate:.0%}" if rate is not None else "–",
                f"resolved · {verification.get('resolved', 0)} of {verification.get('attempts', 0)} attempts")]
    if pass_at:
        k = max(pass_at, key=int)
        out.append(tile(_num(pass_at.get("1")), "pass@1"))
        if k != "1":
            out.append(tile(_num(pass_at[k]), f"pass@{k}"))
    out.append(tile(_money(cost.get("total")), "cost" + (
        f" · {cost['unpriced_attempts']} unpriced" if cost.get("unpriced_attempts") else "")))
    out.append(tile(_money(cost.get("per_solved_task")), "cost per solved task"))
    return out


def _summary_rows(groups: dict[str, dict[str, Any]]) -> str:
    rows = []
    for name, s in groups.items():
        pass_at = s.get("pass_at") or {}
        reward = s.get("reward") or {}
        spread = f" ± {reward['std']:.3f}" if reward.get("std") is not None else ""
        k = max(pass_at, key=int) if pass_at else None
        rows.append(
            f"<tr><td>{escape(name)}</td><td class=\"n\">{s.get('tasks', 0)}</td>"
            f"<td class=\"n\">{s.get('attempts', 0)}</td>"
            f"<td class=\"n\">{_num(s.get('resolved_rate'))}</td>"
            f"<td class=\"n\">{_num(reward.get('mean'))}{spread}</td>"
            f"<td class=\"n\">{_num(pass_at.get('1'))}</td>"
            f"<td class=\"n\">{_num(pass_at.get(k)) + f' (k={k})' if k and k != '1' else '–'}</td>"
            f"<td class=\"n\">{_money((s.get('cost_usd') or {}).get('total'))}</td>"
            f"<td class=\"n\">{_money((s.get('cost_usd') or {}).get('per_solved_task'))}</td>"
            f"<td class=\"n\">{_num((s.get('turns') or {}).get('mean'), 1)}</td>"
            f"<td class=\"n\">{_num((s.get('turns') or {}).get('per_solved_task'), 1)}</td>"
            f"<td class=\"n\">{_num((s.get('duration_s') or {}).get('mean'), 1)}</td></tr>")
    return "".join(rows)


def _summary_table(title: str, groups: dict[str, dict[str, Any]]) -> str:
    if not groups:
        return ""
    return (f'<div class="card"><b>{escape(title)}</b><table><tr><th></th><th class="n">tasks</th>'
            '<th class="n">attempts</th><th class="n">resolved</th><th class="n">reward ± std</th>'
            '<th class="n">pass@1</th><th class="n">pass@k</th><th class="n">cost</th>'
            '<th class="n">per solve</th><th class="n">turns</th><th class="n">turns / solve</th>'
            '<th class="n">mean s</th></tr>'
            f"{_summary_rows(groups)}</table></div>")


def section(verification: dict[str, Any]) -> str:
    if not verification.get("attempts"):
        return ""
    pass_at = verification.get("pass_at") or {}
    spread = verification.get("reward_across_attempts") or {}
    head = ('<h2>Verification</h2><div class="card"><b>pass@k</b> '
            '<span class="meta">(the unbiased estimator of Chen et al. 2021, mean over tasks)</span>'
            "<table><tr>" + "".join(f'<th class="n">pass@{escape(k)}</th>' for k in pass_at)
            + "</tr><tr>" + "".join(f'<td class="n">{_num(v)}</td>' for v in pass_at.values())
            + "</tr></table>")
    if spread.get("mean") is not None:
        head += (f'<p class="meta">Mean reward per attempt round: {_num(spread["mean"])}'
                 + (f" ± {spread['std']:.3f} (sample std over rounds)" if spread.get("std") is not None
                    else "") + f"; verifier errors: {verification.get('verifier_errors', 0)}.</p>")
    head += "</div>"
    everything = {"all": {k: v for k, v in verification.items()
                          if k not in ("by_model", "by_toolset", "by_tag", "per_task")}}
    parts = [head, _summary_table("Run", everything),
             _summary_table("Per model", verification.get("by_model") or {}),
             _summary_table("Per toolset", verification.get("by_toolset") or {}),
             _summary_table("Per tag", verification.get("by_tag") or {}),
             _attempts(verification.get("per_task") or {})]
    return "".join(parts)


def _attempts(per_task: dict[str, dict[str, Any]]) -> str:
    if not per_task or max(t["attempts"] for t in per_task.values()) < 2:
        return ""
    rows = []
    for task, t in list(per_task.items())[:PER_TASK_LIMIT]:
        k = str(t["attempts"])
        std = f" ± {t['reward_std']:.3f}" if t.get("reward_std") is not None else ""
        rows.append(f"<tr><td>{escape(task)}</td><td class=\"n\">{t['resolved']} / {t['attempts']}</td>"
                    f"<td class=\"n\">{_num(t['pass_at'].get('1'))}</td>"
                    f"<td class=\"n\">{_num(t['pass_at'].get(k))} (k={k})</td>"
                    f"<td class=\"n\">{_num(t.get('reward_mean'))}{std}</td></tr>")
    more = (f'<p class="empty">… {len(per_task) - PER_TASK_LIMIT} more in statistics.json.</p>'
            if len(per_task) > PER_TASK_LIMIT else "")
    return ('<div class="card"><b>Attempts per task</b><table><tr><th>task</th>'
            '<th class="n">resolved</th><th class="n">pass@1</th><th class="n">pass@k</th>'
            f'<th class="n">reward ± std</th></tr>{"".join(rows)}</table>{more}</div>')


def verdict_cell(entry: dict[str, Any]) -> str:
    resolved = entry.get("resolved")
    if resolved is None:
        return '<span class="empty">no check</span>'
    reward = entry.get("reward")
    verifier = entry.get("verifier") or {}
    mark = '<span class="ok">✓ resolved</span>' if resolved else '<span class="bad">✗ not resolved</span>'
    detail = f" {reward:g}" if isinstance(reward, int | float) and reward not in (0, 1) else ""
    if verifier.get("error"):
        detail += " · check error"
    return mark + escape(detail)


def verifier_html(entry: dict[str, Any]) -> str:
    """The error of the attempt, then the check's verdict, output tail and failing tests."""
    parts = []
    if entry.get("error"):
        parts.append(f"<h4>Error ({escape(str(entry.get('reason') or ''))})</h4>"
                     f"<pre>{esc_text(entry['error'])}</pre>")
    verifier = entry.get("verifier")
    if verifier:
        head = (f"<h4>Verifier: reward {escape(str(entry.get('reward')))} from "
                f"{escape(str(verifier.get('source') or '–'))}, exit "
                f"{escape(str(verifier.get('exit_code')))}, {verifier.get('duration_s', 0):.2f} s</h4>")
        parts.append(head)
        if verifier.get("error"):
            parts.append(f'<pre class="bad">{esc_text(verifier["error"])}</pre>')
        tests = verifier.get("tests") or {}
        for label, key in (("failing tests", "failed"), ("tests that did not run", "missing")):
            names = tests.get(key) or []
            if names:
                shown = "\n".join(names[:MAX_TEST_NAMES]) + (
                    f"\n… {len(names) - MAX_TEST_NAMES} more" if len(names) > MAX_TEST_NAMES else "")
                parts.append(f"<h4>{label} ({len(names)})</h4><pre>{esc_text(shown)}</pre>")
        if verifier.get("output_tail"):
            parts.append(f"<h4>Check output (tail)</h4><pre>{esc_text(verifier['output_tail'])}</pre>")
    return "".join(parts)
