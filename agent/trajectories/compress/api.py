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
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from talaria.agent.trajectories.compress.plan import Plan

MIN_SUMMARY_TOKENS = 32
PROGRESS_EVERY_S = 5.0


@dataclass(frozen=True, slots=True)
class CompressOptions:
    target_tokens: int = 29_000
    """A trajectory over this many tokens (sum over its turns) is compressed."""
    summary_tokens: int = 750
    """Most tokens a summary turn may take."""
    protect_last: int = 4
    """Last turns always kept verbatim."""
    workers: int = max(1, min(os.cpu_count() or 1, 8))
    """Processes that parse and count tokens."""
    concurrency: int = 16
    """Summary requests in flight."""
    summary_timeout: float = 120.0
    """Seconds per summary before the fallback summary stands in."""
    tokenizer: str | None = None
    """A Hugging Face tokenizer (name or path); None: the bundled cl100k_base (talaria.agent.context.tokens)."""

    def check(self) -> None:
        if self.summary_tokens < MIN_SUMMARY_TOKENS:
            raise ValueError(f"--summary-tokens must be at least {MIN_SUMMARY_TOKENS}")
        if self.target_tokens <= self.summary_tokens:
            raise ValueError("--target-tokens must be larger than --summary-tokens")
        if self.protect_last < 0 or self.workers < 1 or self.concurrency < 1:
            raise ValueError("--protect-last must be >= 0, --workers and --concurrency >= 1")
        if self.summary_timeout <= 0:
            raise ValueError("--summary-timeout must be positive")


DEFAULTS = CompressOptions()


def make_counter(tokenizer: str | None) -> Callable[[str], int]:
    """Token counter: talaria.agent.context.tokens (offline tiktoken) or a Hugging Face tokenizer.
    Raises ValueError when the tokenizer cannot be loaded."""
    if not tokenizer:
        from talaria.agent.context import tokens
        return tokens.count
    try:
        if os.path.isfile(tokenizer):  # a tokenizer.json: the `tokenizers` package suffices
            from tokenizers import Tokenizer

            fast = Tokenizer.from_file(tokenizer)
            return lambda text: len(fast.encode(text, add_special_tokens=False).ids)
        from transformers import AutoTokenizer

        hf = AutoTokenizer.from_pretrained(tokenizer)
        return lambda text: len(hf.encode(text, add_special_tokens=False))
    except ImportError as exc:
        raise ValueError(f"--tokenizer {tokenizer}: install `transformers` (or `tokenizers` "
                         f"for a tokenizer.json file): {exc}") from exc
    except Exception as exc:  # missing files, no network for a hub name
        raise ValueError(f"--tokenizer {tokenizer}: cannot load it: {exc}") from exc


# Planning runs in worker processes: each builds its counter once.
_worker: dict[str, Any] = {}


def _init_worker(options: CompressOptions) -> None:
    _worker["options"] = options
    _worker["count"] = make_counter(options.tokenizer)


def plan_line(line: str) -> tuple[Plan | None, float]:
    """(the plan for one input line, or None when it is not a trajectory; seconds taken)."""
    from talaria.agent.trajectories.compress.plan import plan

    started = time.perf_counter()
    options: CompressOptions = _worker["options"]
    conversation = _conversation(line)
    if conversation is None:
        return None, time.perf_counter() - started
    result = plan(conversation, _worker["count"], target=options.target_tokens,
                  summary_tokens=options.summary_tokens, protect_last=options.protect_last)
    return result, time.perf_counter() - started


def _conversation(line: str) -> list[dict[str, Any]] | None:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    conversation = entry.get("conversations") if isinstance(entry, dict) else None
    if not isinstance(conversation, list) or not all(isinstance(t, dict) for t in conversation):
        return None
    return conversation


def metrics_path(output: Path) -> Path:
    stem = output.name[: -len(".jsonl")] if output.name.endswith(".jsonl") else output.name
    return output.with_name(f"{stem}.metrics.json")


def make_summarizer(summary_model: str | None, summary_tokens: int) -> Any:
    """ProviderSummarizer for `summary_model` (else the configured summary_model, else model)."""
    from talaria.agent.config import load_config
    from talaria.agent.context.compaction import ProviderSummarizer
    from talaria.agent.providers.errors import ProviderError
    from talaria.agent.runtime import make_provider

    config = load_config()
    try:
        provider = make_provider(config, summary_model or config.summary_model)
    except ProviderError as exc:
        raise ValueError(f"summary model: {exc.user_message()}") from exc
    return ProviderSummarizer(provider, max_tokens=summary_tokens * 2)


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
                                   initializer=_init_worker, initargs=(options,))
    else:
        _init_worker(options)
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
