"""Fitting the context into the window a provider names (issue 23, item 11).

A provider that refuses a request as too long usually says its limit ("maximum context length
is 8192 tokens", "210000 tokens > 200000 maximum", see `providers.limits`). That number
becomes the session's window (usage updates and /context report it, automatic compaction
works to it), the context is compacted to leave room for the answer under it, and the call is
retried once, asking for no more answer than fits. When nothing can shrink enough (the system
prompt and the tool definitions alone are too big), the turn ends with the numbers and the
settings that change them.

    max_tokens = await answer_room(session, used)          # before each model call
    max_tokens = await fit_after_overflow(session, error)  # the retry's, or ContextOverflowError
    raise await refused_again(session, error)              # the retry was refused too
"""

from __future__ import annotations

import math

from talaria.agent.context import tokens
from talaria.agent.context.compaction import compact_session
from talaria.agent.events import Notice
from talaria.agent.providers.errors import ContextOverflowError
from talaria.agent.session import Session
from talaria.agent.transcript import is_system

ANSWER_SHARE = 0.25
"""Room kept for the answer when compacting to fit: this share of the window (at most the
session's max_tokens)."""
MIN_ANSWER = 256
"""Fewer tokens than this left for the answer: the context does not fit, the call is not made."""
TOKENIZER_MARGIN = 1.1
"""Our count (cl100k) times this stands for the provider's when its error gives no count."""
SLACK_SHARE = 0.02
"""Share of the window left free beyond our estimate of the prompt: the token ratio was
measured on an earlier request, and new messages frame differently."""
MAX_RATIO = 4.0
"""The provider's tokens per one of ours, at most: a prompt count further off is not this
request's (a misread number), and is not used."""
SETTINGS = ("Use a model with a larger window (the `model` setting, TALARIA_MODEL) or start "
            "its server with a larger context (llama.cpp -c, vLLM --max-model-len, Ollama "
            "num_ctx); `context_window` (TALARIA_CONTEXT_WINDOW) only tells Talaria the size, "
            "it cannot enlarge it")


async def answer_room(session: Session, used: int) -> int | None:
    """The max_tokens for the next call: the session's, or less when the context leaves less
    under the window (a server that counts prompt + max_tokens refuses more). `used` is an
    upper bound on the context (the loop's); only near the window is it counted exactly."""
    wanted = session.max_tokens
    if wanted is None or used * session.token_ratio + wanted <= session.context_window:
        return wanted
    left = session.context_window - _provider_tokens(session, await _exact(session))
    return max(MIN_ANSWER, min(wanted, left))


async def fit_after_overflow(session: Session, error: ContextOverflowError) -> int | None:
    """Learn the window from `error`, compact the context to fit under it; returns the
    max_tokens for the retry. Raises a ContextOverflowError that names the numbers and the
    settings when the context cannot fit."""
    limit, sent, ours = await _learn(session, error)
    short = f"that leaves less than the {MIN_ANSWER:,} an answer needs"
    if limit - _provider_tokens(session, _base(session), limit) < MIN_ANSWER:
        raise _too_large(session, error, limit, sent, None, short)  # no compaction can help
    reserve = max(MIN_ANSWER, min(session.max_tokens or MIN_ANSWER, int(limit * ANSWER_SHARE)))
    budget = max(1, int((limit - reserve) / session.token_ratio))
    now = None
    if ours > budget:
        result = await compact_session(session, force_summary=True, reason="overflow",
                                       window=budget)
        # Its `after` may be an estimate: what the retry sends is counted.
        now = ours = await _exact(session) if result.progress else ours
    room = limit - _provider_tokens(session, ours, limit)
    if room < MIN_ANSWER:
        raise _too_large(session, error, limit, sent, now, short)
    return min(session.max_tokens, room) if session.max_tokens else room


async def refused_again(session: Session, error: ContextOverflowError) -> ContextOverflowError:
    """The error that ends the turn when the retry was refused too (learning from it first)."""
    limit, sent, _ = await _learn(session, error)
    return _too_large(session, error, limit, sent, None, "the retry was refused too")


async def _learn(session: Session, error: ContextOverflowError) -> tuple[int, int, int]:
    """(the limit, what was sent in the provider's tokens, our count of the context); the
    limit becomes the session's window and the provider's count its token ratio."""
    ours = await _exact(session)
    prompt = error.prompt if error.prompt and ours and error.prompt / ours <= MAX_RATIO else None
    if prompt:
        session.token_ratio = max(1.0, prompt / ours)
    elif error.limit:
        session.token_ratio = max(session.token_ratio, TOKENIZER_MARGIN)
    sent = error.prompt or math.ceil(ours * session.token_ratio)
    if error.limit is None:  # it did not say: what was sent was too much, by how much is unknown
        return min(session.context_window, sent), sent, ours
    if error.limit != session.context_window:
        await session.door.emit(Notice(
            f"{session.provider.name} says its context window is {error.limit:,} tokens "
            f"(Talaria assumed {session.context_window:,}): using {error.limit:,} for this "
            f"session; set context_window = {error.limit} in config.toml to start with it.",
            "warning"))
        session.context_window = error.limit
    return error.limit, sent, ours


async def _exact(session: Session) -> int:
    return await session.context.exact(session.tool_definitions())


def _provider_tokens(session: Session, ours: int, window: int | None = None) -> int:
    """Our count as the provider's, with `SLACK_SHARE` of the window to spare."""
    window = session.context_window if window is None else window
    return math.ceil(ours * session.token_ratio + window * SLACK_SHARE)


def _base(session: Session) -> int:
    """Our count of what no compaction shrinks: the system prompt and the tool definitions."""
    system = [m for m in session.messages if is_system(m)]
    return tokens.count_messages(system, session.tool_definitions())


def _too_large(
    session: Session, error: ContextOverflowError, limit: int, sent: int, compacted: int | None,
    why: str,
) -> ContextOverflowError:
    """The error that ends the turn: what was sent, the limit, what cannot shrink, what to set.
    `compacted`: our count of the context after a compaction, if one was made."""
    base = math.ceil(_base(session) * session.token_ratio)
    if error.limit is not None:
        text = (f"the context does not fit the model: {sent:,} tokens were sent and the window "
                f"is {limit:,} (its error says); the system prompt and tool definitions alone "
                f"take {base:,}")
    else:
        text = (f"the context does not fit the model: it refused {sent:,} tokens as too long "
                f"without saying its limit; the system prompt and tool definitions alone take "
                f"{base:,}")
    if compacted is not None:
        text += (f", the context {math.ceil(compacted * session.token_ratio):,} after compaction "
                 "(which keeps the first request and the current turn whole)")
    out = ContextOverflowError(f"{text}: {why}", status=error.status, provider=error.provider,
                               endpoint=error.endpoint)
    out.limit, out.prompt, out.retries = limit, sent, error.retries
    # A new session helps unless the system prompt and tools alone leave no room.
    out.hint = SETTINGS + ("." if limit - base < MIN_ANSWER else
                           "; or start a new session, with a shorter prompt if this one is long.")
    return out
