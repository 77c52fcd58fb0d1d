"""What model calls cost: a price table per model, in US dollars per million tokens.

    price = price_for("anthropic:claude-sonnet-4-5", config.prices)
    dollars = cost_usd({"input": 12_000, "cache_read": 8_000, "output": 900}, price)

A model's price is `input` (uncached prompt tokens), `cached_input` (prompt tokens read from
the provider's cache), `output` (completion tokens, reasoning included) and `cache_write`
(prompt tokens written to the cache; default: `input`). Token counts follow
`providers.base.Usage`: `input` is the whole prompt, its cached parts included.

`DEFAULT_PRICES` holds the providers' list prices for well-known models (as published in
2025; `PRICES_AS_OF`), matched by the longest prefix of the model's name, so dated snapshots
(`gpt-4o-2024-08-06`, `claude-sonnet-4-5-20250929`) take their family's price. `config.toml`
overrides or adds entries:

    [prices."openai:gpt-4o"]           # provider:model, or the model's name alone
    input = 2.5
    cached_input = 1.25
    output = 10.0
    [prices."replay:*"]                # fnmatch patterns work too
    input = 1.0
    output = 2.0

A model with no price has no cost (None), never a made-up one. Used by `talaria batch`
(`cost_usd` per attempt, `--max-cost`) and by a session's `Spend` (what its model calls used
and cost so far: the editor's cost display, a turn's token counts).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PER = 1_000_000
"""Prices are per this many tokens."""
PRICES_AS_OF = "2025-10"


@dataclass(frozen=True, slots=True)
class Price:
    input: float
    output: float
    cached_input: float | None = None
    """None: cached prompt tokens cost `input`."""
    cache_write: float | None = None
    """None: tokens written to the cache cost `input`."""


DEFAULT_PRICES: dict[str, Price] = {
    # OpenAI (platform.openai.com/docs/pricing)
    "gpt-5": Price(1.25, 10.0, 0.125),
    "gpt-5-mini": Price(0.25, 2.0, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
    "gpt-4.1": Price(2.0, 8.0, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "gpt-4o": Price(2.50, 10.0, 1.25),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "o3": Price(2.0, 8.0, 0.50),
    "o3-mini": Price(1.10, 4.40, 0.55),
    "o4-mini": Price(1.10, 4.40, 0.275),
    # Anthropic (docs.anthropic.com pricing; 5-minute cache writes)
    "claude-opus-4-5": Price(5.0, 25.0, 0.50, 6.25),
    "claude-opus-4": Price(15.0, 75.0, 1.50, 18.75),
    "claude-sonnet-4": Price(3.0, 15.0, 0.30, 3.75),
    "claude-3-7-sonnet": Price(3.0, 15.0, 0.30, 3.75),
    "claude-3-5-sonnet": Price(3.0, 15.0, 0.30, 3.75),
    "claude-haiku-4-5": Price(1.0, 5.0, 0.10, 1.25),
    "claude-3-5-haiku": Price(0.80, 4.0, 0.08, 1.0),
    # DeepSeek (api-docs.deepseek.com; cache hit / miss)
    "deepseek-chat": Price(0.27, 1.10, 0.07),
    "deepseek-reasoner": Price(0.55, 2.19, 0.14),
}

_KEYS = {"input", "output", "cached_input", "cache_write"}


def check_prices(table: Any, where: str) -> dict[str, Price]:
    """`[prices]` of config.toml as Prices; ValueError naming the entry and the fix."""
    if not isinstance(table, Mapping):
        raise ValueError(f"{where}: [prices] must be a table of models, e.g. "
                         "[prices.\"openai:gpt-4o\"] input = 2.5, output = 10.0")
    prices: dict[str, Price] = {}
    for model, entry in table.items():
        name = f'[prices."{model}"]'
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where}: {name} must be a table with input and output")
        unknown = sorted(set(entry) - _KEYS)
        if unknown:
            raise ValueError(f"{where}: {name}: unknown key {unknown[0]!r}; "
                             f"known: {', '.join(sorted(_KEYS))}")
        for key, value in entry.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"{where}: {name} {key} must be dollars per million tokens "
                                 f"(a number >= 0), not {value!r}")
        if "input" not in entry or "output" not in entry:
            raise ValueError(f"{where}: {name} needs input and output (dollars per million tokens)")
        prices[str(model)] = Price(float(entry["input"]), float(entry["output"]),
                                   _opt(entry.get("cached_input")), _opt(entry.get("cache_write")))
    return prices


def _opt(value: Any) -> float | None:
    return None if value is None else float(value)


def price_for(model: str | None, overrides: Mapping[str, Price] | None = None) -> Price | None:
    """The price of `model` ("provider:model"): the configured entry for the full name, then
    for the bare name, then the first configured pattern that matches, then the default of
    the longest known prefix. None when nothing matches."""
    if not model:
        return None
    bare = model.partition(":")[2] or model
    bare = bare.rsplit("/", 1)[-1]  # openrouter:anthropic/claude-sonnet-4 -> claude-sonnet-4
    overrides = overrides or {}
    for key in (model, bare):
        if key in overrides:
            return overrides[key]
    for pattern, price in overrides.items():
        if fnmatch.fnmatchcase(model, pattern) or fnmatch.fnmatchcase(bare, pattern):
            return price
    known = [prefix for prefix in DEFAULT_PRICES if bare.startswith(prefix)]
    return DEFAULT_PRICES[max(known, key=len)] if known else None


def cost_usd(tokens: Mapping[str, Any], price: Price | None) -> float | None:
    """Dollars for `tokens` ({"input", "output", "cache_read", "cache_write"}; `input` is the
    whole prompt), or None without a price."""
    if price is None:
        return None
    prompt = int(tokens.get("input") or 0)
    read = int(tokens.get("cache_read") or 0)
    written = int(tokens.get("cache_write") or 0)
    fresh = max(prompt - read - written, 0)
    cached = price.input if price.cached_input is None else price.cached_input
    write = price.input if price.cache_write is None else price.cache_write
    total = (fresh * price.input + read * cached + written * write
             + int(tokens.get("output") or 0) * price.output)
    return total / PER


def describe_price(price: Price) -> str:
    """`$2.50 in / $1.25 cached / $10.00 out per M tokens`, for listings."""
    parts = [f"${price.input:.2f} in"]
    if price.cached_input is not None:
        parts.append(f"${price.cached_input:.3g} cached")
    parts.append(f"${price.output:.2f} out")
    return " / ".join(parts) + " per M tokens"


TOKEN_KINDS = ("input", "output", "cache_read", "cache_write", "reasoning")
"""What a call's usage counts (`providers.base.Usage` without `_tokens`): `input` is the whole
prompt, `cache_read` / `cache_write` parts of it; `output` includes `reasoning`."""


@dataclass(slots=True)
class Spend:
    """What a session's model calls used so far: token totals, and their cost in dollars while
    every call had a price and reported its usage (None from the first that did not: a cost
    left out is not a cost of 0). Kept on the session (`Session.spend`) and in its stored
    record, so a loaded session goes on from its total."""

    prices: Mapping[str, Price] = field(default_factory=dict)
    """`[prices]` of config.toml (the defaults apply besides)."""
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOKEN_KINDS, 0))
    calls: int = 0
    unreported: int = 0
    """Calls whose provider reported no usage (their tokens are not in `tokens`)."""
    cost: float | None = 0.0

    def add(self, model: str | None, usage: Mapping[str, Any]) -> None:
        """One model call of `model` ("provider:model") and its usage (`TOKEN_KINDS` keys)."""
        self.calls += 1
        counts = {kind: int(usage.get(kind) or 0) for kind in TOKEN_KINDS}
        if not any(counts.values()):
            self.unreported += 1
            self.cost = None
            return
        for kind, count in counts.items():
            self.tokens[kind] += count
        call = cost_usd(counts, price_for(model, self.prices))
        self.cost = None if self.cost is None or call is None else self.cost + call

    def absorb(self, other: Spend) -> None:
        """Add another session's spend (a subagent's, when it ends)."""
        for kind in TOKEN_KINDS:
            self.tokens[kind] += other.tokens[kind]
        self.calls += other.calls
        self.unreported += other.unreported
        self.cost = None if self.cost is None or other.cost is None else self.cost + other.cost

    def copy(self) -> Spend:
        return Spend(self.prices, dict(self.tokens), self.calls, self.unreported, self.cost)

    def since(self, before: Spend) -> Spend:
        """The calls made after `before` (a copy taken earlier) as a Spend of their own."""
        tokens = {kind: self.tokens[kind] - before.tokens[kind] for kind in TOKEN_KINDS}
        cost = None if self.cost is None or before.cost is None else self.cost - before.cost
        return Spend(self.prices, tokens, self.calls - before.calls,
                     self.unreported - before.unreported, cost)

    def to_json(self) -> dict[str, Any]:
        return {"tokens": dict(self.tokens), "calls": self.calls, "unreported": self.unreported,
                "cost_usd": self.cost}

    @classmethod
    def from_json(cls, data: Any, prices: Mapping[str, Price]) -> Spend | None:
        """A stored spend (`to_json`), or None when `data` is not one."""
        if not isinstance(data, Mapping) or not isinstance(data.get("tokens"), Mapping):
            return None
        try:
            tokens = {kind: int(data["tokens"].get(kind) or 0) for kind in TOKEN_KINDS}
            cost = data.get("cost_usd")
            return cls(prices, tokens, int(data.get("calls") or 0),
                       int(data.get("unreported") or 0), None if cost is None else float(cost))
        except (TypeError, ValueError):
            return None
