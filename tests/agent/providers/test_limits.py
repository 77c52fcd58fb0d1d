"""The window and prompt size in providers' context-overflow errors, as each spells them, and
their classification as a context overflow (issue 23, item 11)."""

from __future__ import annotations

import pytest

from talaria.agent.providers import errors
from talaria.agent.providers.limits import MAX_WINDOW, MIN_WINDOW, Overflow, overflow_numbers
from talaria.agent.providers.retry import classify_error

# (who says it, status, the error's message, its type/code, limit, prompt)
SPELLINGS = [
    ("OpenAI", 400, "This model's maximum context length is 8192 tokens. However, your messages "
     "resulted in 9000 tokens. Please reduce the length of the messages.",
     "context_length_exceeded", 8192, 9000),
    ("OpenAI, with the completion", 400, "This model's maximum context length is 4097 tokens, "
     "however you requested 4231 tokens (3975 in your prompt; 256 for the completion). Please "
     "reduce your prompt; or completion length.", "invalid_request_error", 4097, 3975),
    ("OpenAI, messages + completion", 400, "This model's maximum context length is 128000 "
     "tokens. However, you requested 130017 tokens (121825 in the messages, 8192 in the "
     "completion). Please reduce the length of the messages or completion.",
     "context_length_exceeded", 128000, 121825),
    ("OpenAI, configured limit", 400, "Input tokens exceed the configured limit of 272,000 "
     "tokens. Your messages resulted in 301,450 tokens. Please reduce the length of the "
     "messages.", "context_length_exceeded", 272000, 301450),
    ("Anthropic", 400, "prompt is too long: 210000 tokens > 200000 maximum",
     "invalid_request_error", 200000, 210000),
    ("Anthropic, with max_tokens", 400, "input length and `max_tokens` exceed context limit: "
     "198000 + 8192 > 200000, decrease input length or `max_tokens` and try again",
     "invalid_request_error", 200000, 198000),
    ("vLLM, max_tokens", 400, "'max_tokens' or 'max_completion_tokens' is too large: 8192. This "
     "model's maximum context length is 8192 tokens and your request has 2281 input tokens "
     "(8192 > 8192 - 2281). None", "BadRequestError", 8192, 2281),
    ("vLLM, prompt", 400, "This model's maximum context length is 4096 tokens. However, your "
     "request has 5000 input tokens. Please reduce the length of the input messages.",
     "BadRequestError", 4096, 5000),
    ("vLLM engine", 400, "The decoder prompt (length 5000) is longer than the maximum model "
     "length of 4096. Make sure that `max_model_len` is no smaller than the number of text "
     "tokens.", "BadRequestError", 4096, 5000),
    ("vLLM engine, older", 400, "Input prompt (5000 tokens) is too long and exceeds limit of "
     "4096", "BadRequestError", 4096, 5000),
    ("llama.cpp", 400, "request (4476 tokens) exceeds the available context size (4096 tokens), "
     "try increasing it", "exceed_context_size_error", 4096, 4476),
    ("TGI / Together", 422, "Input validation error: `inputs` tokens + `max_new_tokens` must be "
     "<= 8193. Given: 8000 `inputs` tokens and 1000 `max_new_tokens`", "validation", 8193, 8000),
    ("Mistral", 400, "Prompt contains 40000 tokens and 0 draft tokens, too large for model with "
     "32768 maximum context length", "invalid_request_message_error", 32768, 40000),
    ("Gemini", 400, "The input token count (1200000) exceeds the maximum number of tokens "
     "allowed (1048576).", "INVALID_ARGUMENT", 1048576, 1200000),
    ("LM Studio", 400, "Trying to keep the first 5000 tokens when context the overflows. "
     "However, the model is loaded with context length of only 4096 tokens, which is not "
     "enough. Try to load the model with a larger context length, or provide a shorter input",
     None, 4096, 5000),
    ("DeepSeek", 400, "This model's maximum context length is 65536 tokens. However, you "
     "requested 70000 tokens (61808 in the messages, 8192 in the completion). Please reduce "
     "the length of the messages or completion.", "invalid_request_error", 65536, 61808),
    ("OpenRouter", 400, "This endpoint's maximum context length is 8192 tokens. However, you "
     "requested about 9000 tokens (8000 of text input, 1000 in the output).",
     None, 8192, 9000),
    ("Fireworks", 400, "The prompt is too long: 10000, model maximum context length: 8192",
     "invalid_request_error", 8192, 10000),
    ("Cohere", 400, "too many tokens: total number of tokens in the prompt cannot exceed 4081 - "
     "received 5000. Try using a shorter prompt, or enabling prompt truncating.", None,
     4081, 5000),
    ("Groq", 400, "Please reduce the length of the messages or completion. The maximum context "
     "length of this model is 8192", "context_length_exceeded", 8192, None),
    ("Ollama, embeddings", 400, "the input length exceeds the context length", None, None, None),
    ("Bedrock", 400, "Input is too long for requested model.", "ValidationException", None, None),
]


@pytest.mark.parametrize(("who", "status", "message", "kind", "limit", "prompt"), SPELLINGS,
                         ids=[row[0] for row in SPELLINGS])
def test_each_spelling_is_an_overflow_with_its_numbers(who, status, message, kind, limit,
                                                       prompt) -> None:
    assert overflow_numbers(message) == Overflow(limit, prompt)
    error = classify_error(status, message, type_=kind, provider="openai:m")
    assert isinstance(error, errors.ContextOverflowError), who
    assert (error.limit, error.prompt) == (limit, prompt)
    if limit is not None:
        assert error.to_data()["limit"] == limit


def test_llama_cpp_says_it_in_the_body_too() -> None:
    body = {"error": {"code": 400, "message": "the request exceeds the available context size, "
                      "try increasing it", "type": "exceed_context_size_error",
                      "n_prompt_tokens": 4100, "n_ctx": 4096}}
    error = classify_error(400, body["error"]["message"], type_="exceed_context_size_error",
                           body=body)
    assert isinstance(error, errors.ContextOverflowError)
    assert (error.limit, error.prompt) == (4096, 4100)


@pytest.mark.parametrize("number", [MIN_WINDOW - 1, MAX_WINDOW + 1])
def test_a_number_that_is_no_window_is_not_taken_for_one(number: int) -> None:
    text = f"This model's maximum context length is {number} tokens."
    assert overflow_numbers(text) == Overflow()
    assert overflow_numbers(text.replace(str(number), str(MIN_WINDOW))).limit == MIN_WINDOW


def test_other_errors_are_not_overflows() -> None:
    for status, message in ((400, "Invalid value for 'temperature': must be <= 2"),
                            (429, "Rate limit reached for gpt-4o: 30000 tokens per min"),
                            (400, "max_tokens must be at least 1, got 0")):
        assert not isinstance(classify_error(status, message), errors.ContextOverflowError)
