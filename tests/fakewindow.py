"""A fake LLM with a small context window: requests that do not fit get the real error body of
the server named, the way that server counts (the prompt alone, or prompt + max_tokens).

    small_window(llm, 8192, "vllm")   # llm.respond refuses what does not fit, in vLLM's words

The prompt is counted as the JSON of its messages and tools (cl100k): more than Talaria's own
count, as a model's tokenizer usually is, so the ratio between the two is exercised too.
"""

from __future__ import annotations

import json
from typing import Any

from talaria.agent.context import tokens
from tests.fakellm import FakeLLM

STYLES = ("openai", "vllm", "llamacpp", "anthropic", "anthropic-max-tokens", "tgi", "mistral")
"""Servers whose refusal is spelt here; each answers on the API its name says (OpenAI's
chat completions unless it starts with "anthropic")."""


def prompt_tokens(body: dict[str, Any]) -> int:
    """What the fake server counts for a request: its messages, system and tools as JSON."""
    parts = [body.get("messages"), body.get("system"), body.get("tools")]
    return tokens.count(json.dumps([p for p in parts if p], separators=(",", ":")))


def refusal(style: str, window: int, prompt: int, answer: int) -> dict[str, Any] | None:
    """The fault turn a server of `style` answers with, or None when the request fits."""
    counts_answer = style in ("openai", "vllm", "anthropic-max-tokens", "tgi")
    if prompt + (answer if counts_answer else 0) <= window:
        return None
    n, p, m = window, prompt, answer
    if style == "openai":
        message = (f"This model's maximum context length is {n} tokens. However, you requested "
                   f"{p + m} tokens ({p} in the messages, {m} in the completion). Please reduce "
                   "the length of the messages or completion.")
        error = {"message": message, "type": "invalid_request_error", "param": "messages",
                 "code": "context_length_exceeded"}
    elif style == "vllm":
        message = (f"'max_tokens' or 'max_completion_tokens' is too large: {m}. This model's "
                   f"maximum context length is {n} tokens and your request has {p} input tokens "
                   f"({m} > {n} - {p}). None")
        error = {"message": message, "type": "BadRequestError", "param": None, "code": 400}
    elif style == "llamacpp":
        error = {"code": 400, "message": f"request ({p} tokens) exceeds the available context "
                 f"size ({n} tokens), try increasing it", "type": "exceed_context_size_error",
                 "n_prompt_tokens": p, "n_ctx": n}
    elif style == "tgi":
        error = {"message": f"Input validation error: `inputs` tokens + `max_new_tokens` must be "
                 f"<= {n}. Given: {p} `inputs` tokens and {m} `max_new_tokens`",
                 "type": "invalid_request_error", "code": None}
    elif style == "mistral":
        error = {"message": f"Prompt contains {p} tokens and 0 draft tokens, too large for model "
                 f"with {n} maximum context length", "type": "invalid_request_message_error",
                 "code": "3051"}
    elif prompt > window:  # anthropic, both spellings
        return {"fault": {"status": 400, "body": {"type": "error", "error": {
            "type": "invalid_request_error",
            "message": f"prompt is too long: {p} tokens > {n} maximum"}}}}
    else:
        return {"fault": {"status": 400, "body": {"type": "error", "error": {
            "type": "invalid_request_error",
            "message": f"input length and `max_tokens` exceed context limit: {p} + {m} > {n}, "
                       "decrease input length or `max_tokens` and try again"}}}}
    return {"fault": {"status": 400, "body": {"error": error}}}


def small_window(llm: FakeLLM, window: int, style: str) -> None:
    """Make `llm` refuse every request that does not fit `window` (the script answers the rest)."""
    assert style in STYLES, style

    def respond(body: dict[str, Any]) -> dict[str, Any] | None:
        answer = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
        return refusal(style, window, prompt_tokens(body), answer)

    llm.respond = respond
