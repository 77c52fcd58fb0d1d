"""The price table: defaults by family, config.toml overrides, what a call costs, and a
session's running spend."""

from __future__ import annotations

from pathlib import Path

import pytest

from talaria.agent.config import load_config
from talaria.agent.pricing import (
    DEFAULT_PRICES,
    Price,
    Spend,
    check_prices,
    cost_usd,
    price_for,
)


@pytest.mark.parametrize("model, family", [
    ("openai:gpt-4o", "gpt-4o"), ("openai:gpt-4o-2024-08-06", "gpt-4o"),
    ("openai:gpt-4o-mini", "gpt-4o-mini"), ("openai:gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"),
    ("anthropic:claude-sonnet-4-5-20250929", "claude-sonnet-4"),
    ("anthropic:claude-opus-4-5", "claude-opus-4-5"), ("anthropic:claude-opus-4-1", "claude-opus-4"),
    ("openrouter:anthropic/claude-haiku-4-5", "claude-haiku-4-5"),
])
def test_defaults_match_the_longest_family(model: str, family: str) -> None:
    assert price_for(model) == DEFAULT_PRICES[family]


def test_unknown_models_have_no_price() -> None:
    assert price_for("openai:my-finetune") is None and price_for(None) is None
    assert cost_usd({"input": 10}, None) is None


def test_cost_counts_cached_and_written_tokens_at_their_price() -> None:
    price = Price(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)
    tokens = {"input": 1_000_000, "cache_read": 600_000, "cache_write": 100_000, "output": 20_000}
    expected = (300_000 * 3.0 + 600_000 * 0.3 + 100_000 * 3.75 + 20_000 * 15.0) / 1e6
    assert cost_usd(tokens, price) == pytest.approx(expected)
    assert cost_usd({"input": 1_000_000}, Price(2.0, 8.0)) == pytest.approx(2.0)


def test_config_overrides_and_patterns(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        '[prices."openai:gpt-4o"]\ninput = 1.0\noutput = 2.0\n'
        '[prices."replay:*"]\ninput = 0.5\noutput = 0.5\ncached_input = 0.1\n')
    prices = load_config(env={"TALARIA_HOME": str(tmp_path)}).prices
    assert price_for("openai:gpt-4o", prices) == Price(1.0, 2.0)
    assert price_for("replay:/tmp/s.json", prices) == Price(0.5, 0.5, 0.1)
    assert price_for("openai:gpt-4o-mini", prices) == DEFAULT_PRICES["gpt-4o-mini"]


@pytest.mark.parametrize("table, message", [
    ({"m": {"input": 1.0}}, 'needs input and output'),
    ({"m": {"input": 1.0, "output": -1}}, "output must be dollars per million tokens"),
    ({"m": {"input": 1.0, "output": 1.0, "outptu": 2}}, "unknown key 'outptu'"),
    ({"m": 3}, "must be a table"),
])
def test_bad_price_tables_name_the_entry(table: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_prices(table, "config.toml")


def test_a_bad_price_in_config_toml_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[prices.x]\ninput = "cheap"\noutput = 1\n')
    with pytest.raises(ValueError, match=r'config.toml: \[prices."x"\] input must be dollars'):
        load_config(env={"TALARIA_HOME": str(tmp_path)})


def test_spend_sums_calls_and_prices_each_by_its_model() -> None:
    spend = Spend({"openai:mine": Price(1.0, 2.0)})
    spend.add("openai:mine", {"input": 1000, "output": 100})
    spend.add("openai:gpt-4o", {"input": 2000, "cache_read": 1000, "output": 10, "reasoning": 4})
    assert spend.tokens == {"input": 3000, "output": 110, "cache_read": 1000, "cache_write": 0,
                            "reasoning": 4}
    assert spend.cost == pytest.approx((1000 + 200 + 1000 * 2.5 + 1000 * 1.25 + 100) / 1e6)
    before = spend.copy()
    spend.add("openai:mine", {"input": 10, "output": 1})
    turn = spend.since(before)
    assert (turn.calls, turn.tokens["input"], turn.cost) == (1, 10, pytest.approx(12 / 1e6))


def test_an_unpriced_or_unreported_call_makes_the_cost_unknown_from_then_on() -> None:
    for model, usage in (("openai:my-finetune", {"input": 10, "output": 1}),
                         ("openai:gpt-4o", {})):  # a provider that reported nothing
        spend = Spend()
        spend.add("openai:gpt-4o", {"input": 10, "output": 1})
        spend.add(model, usage)
        spend.add("openai:gpt-4o", {"input": 10, "output": 1})
        assert spend.cost is None and spend.calls == 3
    assert spend.unreported == 1 and spend.tokens["input"] == 20
    parent = Spend()
    parent.add("openai:gpt-4o", {"input": 10, "output": 1})
    parent.absorb(spend)  # a subagent whose cost is unknown
    assert parent.cost is None and parent.calls == 4


def test_a_stored_spend_comes_back_and_anything_else_is_none() -> None:
    spend = Spend()
    spend.add("openai:gpt-4o", {"input": 100, "output": 10})
    again = Spend.from_json(spend.to_json(), {})
    assert again is not None and again.to_json() == spend.to_json()
    for bad in (None, [], {"tokens": 3}, {"tokens": {"input": "many"}}):
        assert Spend.from_json(bad, {}) is None
