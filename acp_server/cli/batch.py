"""`talaria batch` and `talaria trajectories compress`: parsers and entry points.

`acp_server/cli.py` adds the parsers (`add_batch_parser(sub)`, `add_compress_parser(tsub)`) and
calls `run_batch_cli(args)` / `run_compress(args)`; everything heavy is imported inside them.
`python -m talaria.acp_server.cli.batch batch ...` runs the same code without the main CLI.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

FIRST_ERROR_CHARS = 300
"""Characters of each failure kind's first error in the summary (the rest: statistics.json)."""
EXIT_CODES = """exit status:
  0    every task completed (with --agent oracle: and every checked task scored 1;
       with --agent nop: and no check passed)
  1    at least one task failed (statistics.json has failures_by_reason;
       re-run the failed ones with --retry-failed), or a control agent found broken tasks
  2    bad input: the tasks (unknown key, no tasks), an option, a used run directory without
       --resume, or --resume with another tasks file
  130  interrupted (Ctrl-C); continue with --resume"""
FORMATS = """TASKS is one of:
  a JSONL file of task lines: {"prompt", "id"?, "workspace"?, "cwd"?, "model"?, "toolsets"?,
     "environment"?, "check"?: {"command", "timeout"?, "env"?}, "tests"?, "solution"?,
     "tags"?, "timeout"?}
  a directory of Harbor task directories (instruction.md, task.toml, environment/Dockerfile,
     tests/test.sh, solution/solve.sh); each runs in a container of its image
  a JSONL file of SWE-bench instances ({"instance_id", "repo", "base_commit", ...}) with
     --repos DIR holding a clone of each repository (DIR/owner__name)
Any other key of a task line is an error naming the closest known one. Results in
OUTPUT_DIR/RUN_NAME/: trajectories.jsonl (one line per finished attempt), checkpoint.json (what
--resume reads), statistics.json (counts, verdicts, first error of each kind), attempts.jsonl
(the failed lines --retry-failed replaced), logs/."""
MAX_NAMED = 20
"""Broken tasks a control run names on stderr (all are in trajectories.jsonl)."""


def add_batch_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    batch = subparsers.add_parser(
        "batch", help="run many tasks from a JSONL file, each in its own workspace",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run many tasks unattended, each in its own workspace, verified by its "
        "check.\n\n" + FORMATS, epilog=EXIT_CODES)
    batch.add_argument("tasks", help="tasks file, Harbor dataset directory, or SWE-bench JSONL")
    batch.add_argument("--run-name", required=True, help="name of the run directory")
    batch.add_argument("--output-dir", default="data", help="where runs go (default: data)")
    batch.add_argument("--workers", type=int, default=4, help="tasks at once (default: 4)")
    batch.add_argument("--model", help="provider:model for tasks without their own")
    batch.add_argument("--max-turns", type=int, help="model calls allowed per task")
    batch.add_argument("--env", metavar="NAME[:ARG]",
                       help="execution environment of tasks without their own (docker, ssh:HOST...)")
    batch.add_argument("--toolsets", nargs="+", metavar="NAME",
                       help="toolsets or tool names (comma or space separated; default: core)")
    batch.add_argument("--toolset-mix", metavar="ARM=W,...",
                       help="draw each task's toolsets: e.g. \"core=0.5,core-execute_code=0.5\" "
                       "(an arm joins toolset/tool names with + and -; weights are relative); "
                       "statistics break down by arm")
    batch.add_argument("--seed", type=int, help="seed of --toolset-mix's draw (default 0; "
                       "the draw is per task id, the same on --resume)")
    batch.add_argument("--task-timeout", type=float, help="wall seconds per task (default: 1800)")
    again = batch.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true", help="continue: skip finished tasks")
    again.add_argument("--retry-failed", action="store_true", help="re-run only failed tasks")
    batch.add_argument("--executor", choices=("local", "ray"),
                       help="local worker processes (default) or a Ray cluster")
    batch.add_argument("--address", help="Ray cluster address, e.g. ray://HEAD:10001 or "
                       "HEAD:6379 (default: start a local Ray instance for this run)")
    batch.add_argument("--agent", choices=("talaria", "oracle", "nop"),
                       help="talaria (default); oracle: run each task's solution instead "
                       "(finds broken tasks); nop: do nothing (finds checks that always pass)")
    batch.add_argument("--attempts", type=int, metavar="K",
                       help="run each task K times, each in a fresh workspace (pass@k)")
    batch.add_argument("--max-cost", type=float, metavar="USD",
                       help="stop an attempt whose model calls cost more (status cost_limit; "
                       "prices: [prices] in config.toml)")
    batch.add_argument("--skills", metavar="SET|none",
                       help="every task reads this skill set (talaria skills learn) as its whole "
                       "skill library, read-only; none: no skills at all (the baseline)")
    batch.add_argument("--repos", metavar="DIR",
                       help="clones of the repositories SWE-bench instances name (DIR/owner__name)")
    batch.add_argument("--keep-workspaces", action="store_true",
                       help="keep each task's directory under RUN/tasks/ after it finishes, and "
                       "the workers' homes with each task's checkpoints (talaria checkpoints)")
    batch.add_argument("--no-checkpoints", action="store_true",
                       help="with --keep-workspaces: take no checkpoints of the task workspaces")
    return batch


def run_batch_cli(args: argparse.Namespace) -> int:
    """Exit status: see EXIT_CODES."""
    from talaria.agent.trajectories.batch.checkpoint import RunExistsError
    from talaria.agent.trajectories.batch.runner import BatchOptions, run_batch
    from talaria.agent.trajectories.batch.tasks import TaskFileError

    toolsets = None
    if args.toolsets:
        toolsets = tuple(n.strip() for part in args.toolsets for n in part.split(",") if n.strip())
    options = BatchOptions(
        tasks_file=Path(args.tasks), run_name=args.run_name, output_dir=Path(args.output_dir),
        workers=args.workers, model=args.model, max_turns=args.max_turns, toolsets=toolsets,
        resume=args.resume, retry_failed=args.retry_failed, executor=args.executor,
        address=args.address, task_timeout=args.task_timeout,
        keep_workspaces=args.keep_workspaces, environment=args.env,
        no_checkpoints=args.no_checkpoints, agent=args.agent, attempts=args.attempts,
        max_cost=args.max_cost, repos=Path(args.repos) if args.repos else None,
        skills=args.skills,
        toolset_mix=args.toolset_mix, seed=args.seed,
    )
    try:
        result = run_batch(options)
    except (TaskFileError, RunExistsError, ValueError) as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ntalaria: interrupted; continue with --resume", file=sys.stderr)
        return 130
    print(f"{result.completed} completed, {result.failed} failed of {result.total} "
          f"({result.ran} run now) -> {result.run_dir}", file=sys.stderr)
    verified = result.statistics.get("verification") or {}
    if verified.get("attempts"):
        passes = ", ".join(f"pass@{k} {v:.3f}" for k, v in verified["pass_at"].items())
        print(f"verified: {verified['resolved']} of {verified['attempts']} attempts resolved "
              f"({passes})", file=sys.stderr)
    broken = control_findings(result.run_dir)
    if broken:
        print(broken, file=sys.stderr)
        return 1
    if result.failed == 0 and result.completed == result.total:
        return 0
    reasons = result.statistics.get("failures_by_reason") or {}
    why = ", ".join(f"{n} {reason}" for reason, n in reasons.items())
    print(f"talaria: {result.failed} task(s) failed ({why}); re-run them with --retry-failed",
          file=sys.stderr)
    for reason, first in (result.statistics.get("first_failures") or {}).items():
        error = " ".join(str(first.get("error") or "no error text").split())
        print(f"  {reason}, first in task {first.get('task_id')}: {error[:FIRST_ERROR_CHARS]}",
              file=sys.stderr)
    return 1


def control_findings(run_dir: Path) -> str | None:
    """What a control run (--agent oracle / nop) found wrong with the dataset, or None."""
    import json

    from talaria.agent.trajectories.batch.checkpoint import CHECKPOINT, RunDir

    try:
        agent = json.loads((run_dir / CHECKPOINT).read_text(encoding="utf-8"))["options"]["agent"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if agent not in ("oracle", "nop"):
        return None
    run = RunDir(run_dir, {})
    if agent == "oracle":
        bad = sorted({f"{r['task_id']}" for r in run.records()
                      if r.get("resolved") is False or r.get("reward") not in (None, 1.0)})
        why = "the oracle did not score 1 on"
    else:
        bad = sorted({f"{r['task_id']}" for r in run.records() if r.get("resolved")})
        why = "a check passed with no agent (nop) on"
    if not bad:
        return None
    named = ", ".join(bad[:MAX_NAMED]) + (f" and {len(bad) - MAX_NAMED} more" if len(bad) > MAX_NAMED else "")
    return (f"talaria: broken tasks: {why} {len(bad)} task(s): {named} "
            "(their verifier output is in trajectories.jsonl)")


def add_compress_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from talaria.agent.trajectories.compress.api import DEFAULTS

    compress = subparsers.add_parser(
        "compress", help="compress ShareGPT trajectories to a token budget",
        description="For each trajectory over --target-tokens, replace the smallest middle span "
        "that brings it under with one [CONTEXT SUMMARY] turn written by the summary model. "
        "Metrics go to OUT.metrics.json.")
    compress.add_argument("input", help="ShareGPT JSONL ({\"conversations\": [...]} per line)")
    compress.add_argument("-o", "--output", required=True, help="output JSONL")
    compress.add_argument("--target-tokens", type=int, default=DEFAULTS.target_tokens)
    compress.add_argument("--summary-tokens", type=int, default=DEFAULTS.summary_tokens,
                          help="token budget of each summary turn")
    compress.add_argument("--protect-last", type=int, default=DEFAULTS.protect_last,
                          help="last turns kept verbatim")
    compress.add_argument("--workers", type=int, default=DEFAULTS.workers,
                          help="processes that parse and count tokens")
    compress.add_argument("--concurrency", type=int, default=DEFAULTS.concurrency,
                          help="summary requests in flight")
    compress.add_argument("--summary-model", help="provider:model for summaries "
                          "(default: summary_model, else model, from the configuration)")
    compress.add_argument("--summary-timeout", type=float, default=DEFAULTS.summary_timeout,
                          help="seconds per summary before the fallback summary stands in")
    compress.add_argument("--tokenizer", help="a Hugging Face tokenizer (name or local path; "
                          "needs `transformers`) instead of the bundled cl100k_base")
    return compress


def run_compress(args: argparse.Namespace) -> int:
    """Exit status: 0 all under budget, 1 some still over the limit, 2 bad input."""
    from talaria.agent.trajectories.compress.api import CompressOptions, compress_file

    options = CompressOptions(
        target_tokens=args.target_tokens, summary_tokens=args.summary_tokens,
        protect_last=args.protect_last, workers=args.workers, concurrency=args.concurrency,
        summary_timeout=args.summary_timeout, tokenizer=args.tokenizer,
    )
    try:
        summary = compress_file(Path(args.input), Path(args.output), options,
                                summary_model=args.summary_model, progress_out=sys.stderr)
    except (OSError, ValueError) as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ntalaria: interrupted", file=sys.stderr)
        return 130
    totals = summary["aggregate"]
    print(f"{totals['trajectories']} trajectories: {totals['compressed']} compressed, "
          f"{totals['still_over_limit']} still over the limit, "
          f"{totals['summarization_errors']} summary errors -> {args.output}", file=sys.stderr)
    return 1 if totals["still_over_limit"] else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="talaria")
    sub = parser.add_subparsers(dest="command", required=True)
    add_batch_parser(sub)
    trajectories = sub.add_parser("trajectories", help="work with trajectory files")
    tsub = trajectories.add_subparsers(dest="trajectories_command", required=True)
    add_compress_parser(tsub)
    args = parser.parse_args(argv)
    if args.command == "batch":
        return run_batch_cli(args)
    return run_compress(args)


if __name__ == "__main__":
    sys.exit(main())
