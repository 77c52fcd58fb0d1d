"""The CPU part of compression, run in worker processes: options, token counters, and the
plan for one input line (which span of a trajectory to summarize, see `plan`)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from talaria.agent.trajectories.compress.plan import Plan, plan

MIN_SUMMARY_TOKENS = 32


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


def init_worker(options: CompressOptions) -> None:
    _worker["options"] = options
    _worker["count"] = make_counter(options.tokenizer)


def plan_line(line: str) -> tuple[Plan | None, float]:
    """(the plan for one input line, or None when it is not a trajectory; seconds taken)."""
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


