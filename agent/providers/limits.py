"""The numbers in a context-overflow error: the model's window and the prompt's size, as the
provider counted them.

    overflow_numbers("This model's maximum context length is 8192 tokens. However, your "
                     "messages resulted in 9000 tokens.")   -> Overflow(limit=8192, prompt=9000)

Providers say their limit in the error text, each in its own words; `PATTERNS` holds the
spellings seen from OpenAI, Anthropic and the OpenAI-compatible servers (vLLM, llama.cpp,
TGI, LM Studio, Mistral, Gemini, DeepSeek, OpenRouter, Fireworks, Cohere); llama.cpp also
puts them in the error body (`n_ctx`, `n_prompt_tokens`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

MIN_WINDOW = 128
MAX_WINDOW = 100_000_000
"""A number outside [MIN_WINDOW, MAX_WINDOW] is not a context window (a status, a byte count)."""
_N = r"(\d{1,3}(?:[,_]\d{3})+|\d+)"


def _p(pattern: str) -> str:
    return pattern.replace("N", _N)


# (pattern, the group that is the limit, the group that is the prompt or 0), first match wins.
# Compiled on the first overflow (`_patterns`): 20 regexes at import cost a session ~40 ms.
PATTERNS: tuple[tuple[str, int, int], ...] = (
    # Anthropic
    (_p(r"prompt is too long: N tokens > N maximum"), 2, 1),
    (_p(r"input length and `?max_tokens`? exceed context limit: N \+ N > N"), 3, 1),
    # OpenAI, vLLM, DeepSeek, Groq, OpenRouter: "maximum context length is 8192 tokens", then
    # "(9000 in the messages" / "your request has 9000 input tokens" / "resulted in 9000 tokens"
    (_p(r"maximum context length is N tokens.*?\(N in (?:the|your) (?:messages|prompt)"), 1, 2),
    (_p(r"maximum context length is N tokens.*?request has N input tokens"), 1, 2),
    (_p(r"maximum context length is N tokens.*?(?:resulted in|requested(?: about)?) N tokens"),
     1, 2),
    (_p(r"input tokens exceed the configured limit of N tokens.*?resulted in N tokens"), 1, 2),
    (_p(r"exceed(?:s|ed)? the configured limit of N tokens"), 1, 0),
    # llama.cpp server
    (_p(r"request \(N tokens\) exceeds the available context size \(N tokens\)"), 2, 1),
    # vLLM engine checks
    (_p(r"prompt \(length N\) is longer than the maximum model length of N"), 2, 1),
    (_p(r"prompt \(N tokens\) is too long and exceeds limit of N"), 2, 1),
    # TGI, Together
    (_p(r"`inputs` tokens \+ `max_new_tokens` must be <= N\. Given: N `inputs` tokens"), 1, 2),
    # Mistral
    (_p(r"prompt contains N tokens.*?too large for model with N maximum context length"), 2, 1),
    # Gemini (OpenAI-compatible endpoint)
    (_p(r"input token count \(N\) exceeds the maximum number of tokens allowed \(N\)"), 2, 1),
    # LM Studio
    (_p(r"keep the first N tokens.*?context length of only N tokens"), 2, 1),
    # Fireworks, Cohere
    (_p(r"prompt is too long: N, model maximum context length: N"), 2, 1),
    (_p(r"cannot exceed N - received N"), 1, 2),
    # Last: any "maximum context length is N" / "context length of N" / "context size (N"
    (_p(r"(?:maximum|max) context length (?:of this \w+ )?(?:is |of )?N"), 1, 0),
    (_p(r"context (?:length|window|size|limit) (?:is |of |\()N"), 1, 0),
)


@cache
def _patterns() -> tuple[tuple[re.Pattern[str], int, int], ...]:
    return tuple((re.compile(p, re.I | re.S), limit, prompt) for p, limit, prompt in PATTERNS)


@dataclass(frozen=True, slots=True)
class Overflow:
    limit: int | None = None
    """The model's context window, in the provider's tokens."""
    prompt: int | None = None
    """What the request's input came to, in the provider's tokens (its tokenizer, not ours)."""


def _int(text: str) -> int:
    return int(text.replace(",", "").replace("_", ""))


def overflow_numbers(message: str, body: Mapping[str, Any] | None = None) -> Overflow:
    """The limit and the prompt size an overflow error states; None for what it does not."""
    for pattern, limit_group, prompt_group in _patterns():
        if found := pattern.search(message or ""):
            limit = _int(found.group(limit_group))
            prompt = _int(found.group(prompt_group)) if prompt_group else None
            if MIN_WINDOW <= limit <= MAX_WINDOW:
                return Overflow(limit, prompt)
    if body is not None:  # llama.cpp: {"n_ctx": 4096, "n_prompt_tokens": 4476, ...}
        n_ctx, n_prompt = body.get("n_ctx"), body.get("n_prompt_tokens")
        if isinstance(n_ctx, int) and MIN_WINDOW <= n_ctx <= MAX_WINDOW:
            return Overflow(n_ctx, n_prompt if isinstance(n_prompt, int) else None)
    return Overflow()
