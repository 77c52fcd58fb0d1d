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
  0    every task completed
  1    at least one task failed (statistics.json has failures_by_reason;
       re-run the failed ones with --retry-failed)
  2    bad input: the tasks file (unknown key, no tasks), an option, a used run
       directory without --resume, or --resume with another tasks file
  130  interrupted (Ctrl-C); continue with --resume"""


def add_batch_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    batch = subparsers.add_parser(
        "batch", help="run many tasks from a JSONL file, each in its own workspace",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run the tasks of TASKS.jsonl unattended: one JSON object per line with the keys\n"
        "  prompt       what to do (required)\n"
        "  id           a stable id (default: a hash of the line); --resume matches on it\n"
        "  workspace    a template directory, copied fresh for the task\n"
        "  cwd          an existing directory, used as it is\n"
        "  model        provider:model for this task\n"
        "  toolsets     toolsets or tool names for this task\n"
        "  environment  where it runs (NAME[:ARG], as --env)\n"
        "Any other key is an error naming the closest known one. Results in\n"
        "OUTPUT_DIR/RUN_NAME/: trajectories.jsonl (one line per finished task),\n"
        "checkpoint.json (what --resume reads), statistics.json (counts, first error of each\n"
        "kind), attempts.jsonl (the failed lines --retry-failed replaced), logs/.",
        epilog=EXIT_CODES)
    batch.add_argument("tasks", help="tasks file (JSON lines)")
    batch.add_argument("--run-name", required=True, help="name of the run directory")
    batch.add_argument("--output-dir", default="data", help="where runs go (default: data)")
    batch.add_argument("--workers", type=int, default=4, help="tasks at once (default: 4)")
    batch.add_argument("--model", help="provider:model for tasks without their own")
    batch.add_argument("--max-turns", type=int, help="model calls allowed per task")
    batch.add_argument("--env", metavar="NAME[:ARG]",
                       help="execution environment of tasks without their own (docker, ssh:HOST...)")
    batch.add_argument("--toolsets", nargs="+", metavar="NAME",
                       help="toolsets or tool names (comma or space separated; default: core)")
    batch.add_argument("--task-timeout", type=float, help="wall seconds per task (default: 1800)")
    again = batch.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true", help="continue: skip finished tasks")
    again.add_argument("--retry-failed", action="store_true", help="re-run only failed tasks")
    batch.add_argument("--executor", choices=("local", "ray"),
                       help="local worker processes (default) or a Ray cluster")
    batch.add_argument("--address", help="Ray cluster address (default: a local Ray instance)")
    batch.add_argument("--keep-workspaces", action="store_true",
                       help="keep each task's directory under RUN/tasks/ after it finishes")
    batch.add_argument("--no-checkpoints", action="store_true",
                       help="take no checkpoints of the task workspaces (talaria checkpoints)")
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
        no_checkpoints=args.no_checkpoints,
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
    if not result.failed:
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
