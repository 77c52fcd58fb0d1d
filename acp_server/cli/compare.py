"""`talaria trajectories compare RUN_A RUN_B [RUN ...]`: batch runs of the same tasks, paired.

Writes a self-contained HTML page and a JSON file beside it (`-o OUT.html`; default
`compare-A-vs-B.html` in the current directory) and prints their paths. The first run is the
baseline; each other run is compared with it over the tasks checked in every run (how
outcomes are paired: agent/trajectories/compare/build.py). Exit 2 with one line, writing
nothing, for a missing run, runs that share no checked task, or an unreadable line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_compare_parser(subparsers: Any) -> argparse.ArgumentParser:
    from talaria.agent.trajectories.compare.paired import LEVEL, RESAMPLES, SEED

    compare = subparsers.add_parser(
        "compare", help="compare batch runs of the same tasks (pass rates, cost, tools)",
        description="Pair two or more `talaria batch` runs by task: solved in A only, B only, "
        "both, neither; the pass-rate difference with a paired bootstrap interval and "
        "McNemar's test; cost, turns, tokens and time per solve; tool usage side by side. "
        "The first run is the baseline.")
    compare.add_argument("runs", nargs="+", metavar="RUN",
                         help="run directories (data/RUN_NAME) or their trajectories.jsonl")
    compare.add_argument("-o", "--output", metavar="OUT.html",
                         help="the page (the JSON goes beside it as OUT.json; default "
                         "compare-A-vs-B.html here)")
    compare.add_argument("--resamples", type=int, default=RESAMPLES,
                         help=f"bootstrap resamples (default {RESAMPLES})")
    compare.add_argument("--seed", type=int, default=SEED, help=f"bootstrap seed (default {SEED})")
    compare.add_argument("--level", type=float, default=LEVEL,
                         help=f"confidence level of the intervals (default {LEVEL})")
    return compare


def run_compare(args: argparse.Namespace) -> int:
    from talaria.agent.trajectories.compare.command import compare
    from talaria.agent.trajectories.compare.outcomes import CompareError

    if len(args.runs) < 2:
        print("talaria: compare needs at least two runs (RUN_A RUN_B)", file=sys.stderr)
        return 2
    try:
        html, data_file, data = compare([Path(r) for r in args.runs],
                                        Path(args.output) if args.output else None,
                                        resamples=args.resamples, seed=args.seed, level=args.level)
    except CompareError as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return 2
    left = [f"{r['label']} {r['left_out']}" for r in data["runs"] if r["left_out"]]
    print(f"compared {data['shared_tasks']} shared task(s)"
          + (f"; left out (not checked in every run): {', '.join(left)}" if left else ""),
          file=sys.stderr)
    for c in data["comparisons"]:
        d, test = c["difference"]["pass_at_1"], c["mcnemar"]
        print(f"{c['b']} vs {c['a']}: pass@1 {d['b']:.3f} vs {d['a']:.3f}, difference "
              f"{d['diff']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}]; solved only by "
              f"{c['b']}: {c['counts']['b_only']}, only by {c['a']}: {c['counts']['a_only']}; "
              f"McNemar p={test['p_value']:.4g} ({test['method']})", file=sys.stderr)
    print(html)
    print(data_file)
    return 0
