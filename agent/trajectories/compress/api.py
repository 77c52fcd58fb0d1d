"""Compress ShareGPT trajectories to a token budget (`talaria trajectories compress`).

    summary = compress_file(Path("in.jsonl"), Path("out.jsonl"), CompressOptions(),
                            summarizer=None)   # None: the configured summary model

Each line `{"conversations": [...], ...}` over `target_tokens` gets its smallest middle span
replaced by one human `[CONTEXT SUMMARY]: ...` turn (see trajectory_compress_plan for the cut);
lines under the target, and lines that are not trajectories, are written back byte-identical.
No line is ever dropped: a summary that fails or times out is replaced by a deterministic one
(`summary_fallback`), and a trajectory whose protected turns alone exceed the target is
summarized as far as it can be and marked `still_over_limit`. Output order is input order.

Token counting (the CPU part) runs in `workers` processes; summaries run `concurrency` at a
time on one event loop. Metrics go to `OUT.metrics.json` (per trajectory and aggregate).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

from talaria.agent.trajectories.compress.worker import (
    DEFAULTS,
    CompressOptions,
    init_worker,
    make_counter,
    plan_line,
)

__all__ = ["DEFAULTS", "CompressOptions", "compress_file", "make_counter", "plan_line"]

def metrics_path(output: Path) -> Path:
    stem = output.name[: -len(".jsonl")] if output.name.endswith(".jsonl") else output.name
    return output.with_name(f"{stem}.metrics.json")


def make_summarizer(summary_model: str | None, summary_tokens: int) -> Any:
    """ProviderSummarizer for `summary_model` (else the configured summary_model, else model)."""
    from talaria.agent.config import load_config
    from talaria.agent.context.summarizer import ProviderSummarizer
    from talaria.agent.providers.errors import ProviderError
    from talaria.agent.runtime import make_provider

    config = load_config()
    try:
        provider = make_provider(config, summary_model or config.summary_model)
    except ProviderError as exc:
        raise ValueError(f"summary model: {exc.user_message()}") from exc
    return ProviderSummarizer(provider, summary_tokens=summary_tokens * 2)


def compress_file(
    source: Path, output: Path, options: CompressOptions = DEFAULTS, *,
    summarizer: Any = None, summary_model: str | None = None,
    progress_out: TextIO | None = None,
) -> dict[str, Any]:
    """Compress `source` into `output`; write and return the metrics. Raises ValueError/OSError."""
    import anyio

    from talaria.agent.trajectories.compress.run import Pipeline

    options.check()
    if not source.is_file():
        raise ValueError(f"{source}: no such file")
    # Read as every trajectories command reads (a file that is not trajectories is refused,
    # naming its bad lines), before any work: never a verbatim copy called compressed.
    from talaria.agent.trajectories.lines import trajectory_lines
    from talaria.agent.trajectories.model import TrajectoryNotFound

    try:
        trajectory_lines(source, "nothing was written", keep=False)
    except TrajectoryNotFound as exc:
        raise ValueError(str(exc)) from None
    count = make_counter(options.tokenizer)  # fail here, not in every worker
    summarizer = summarizer or make_summarizer(summary_model, options.summary_tokens)
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f".{output.name}.partial")
    started = time.monotonic()
    pool = None
    if options.workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(options.workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=init_worker, initargs=(options,))
    else:
        init_worker(options)
    try:
        with source.open(encoding="utf-8") as lines, partial.open("w", encoding="utf-8") as out:
            pipeline = Pipeline(options, summarizer, count, pool, out, progress_out)
            anyio.run(pipeline.run, lines)
        os.replace(partial, output)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        partial.unlink(missing_ok=True)
    report = {"aggregate": pipeline.aggregate(time.monotonic() - started),
              "options": asdict(options), "input": str(source), "output": str(output),
              "trajectories": pipeline.metrics}
    tmp = metrics_path(output).with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, metrics_path(output))
    return report
