"""The paired statistics of `trajectories compare` against values worked out by hand, and the
bootstrap on synthetic data with a known difference (it covers it; it narrows with n)."""

from __future__ import annotations

import math
import random

import pytest

from talaria.agent.trajectories.compare.build import task_values
from talaria.agent.trajectories.compare.outcomes import Attempt
from talaria.agent.trajectories.compare.paired import (
    EXACT_BELOW,
    bootstrap_diff,
    mcnemar,
    quantile,
)


@pytest.mark.parametrize(("b", "c", "p"), [
    (1, 6, 2 * (1 + 7) / 2**7),          # 2 · P(X <= 1), X ~ Bin(7, ½) = 16/128
    (0, 5, 2 / 2**5),                    # one-sided tail 1/32, doubled
    (2, 0, 2 * 1 / 4),                   # oracle against nop on two tasks
    (3, 3, 1.0),                         # 2 · 42/64 > 1: capped
    (4, 9, 2 * (1 + 13 + 78 + 286 + 715) / 2**13),
])
def test_mcnemar_exact_matches_the_binomial_by_hand(b: int, c: int, p: float) -> None:
    test = mcnemar(b, c)
    assert test.method == "exact" and test.statistic is None
    assert test.p_value == pytest.approx(p, rel=1e-12)
    assert mcnemar(c, b).p_value == test.p_value  # two-sided: symmetric


def test_mcnemar_chi_square_with_continuity_correction() -> None:
    # (|10 - 30| - 1)^2 / 40 = 9.025; chi-square(1) above 9.025 is 0.0026636 (tables).
    test = mcnemar(10, 30)
    assert test.method == "chi2_cc" and test.statistic == pytest.approx(9.025)
    assert test.p_value == pytest.approx(0.0026636, abs=5e-7)
    # (|40 - 60| - 1)^2 / 100 = 3.61: p = 0.057433 (just above 0.05).
    assert mcnemar(40, 60).p_value == pytest.approx(0.057433, abs=5e-6)


def test_mcnemar_switches_to_chi_square_at_its_bound_and_handles_no_discordance() -> None:
    assert mcnemar(0, EXACT_BELOW - 1).method == "exact"
    assert mcnemar(0, EXACT_BELOW).method == "chi2_cc"
    none = mcnemar(0, 0)
    assert (none.method, none.p_value) == ("none", 1.0)
    with pytest.raises(ValueError, match="discordant"):
        mcnemar(-1, 2)


def test_quantile_interpolates_like_r_type_7() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    assert quantile(values, 0.0) == 1.0 and quantile(values, 1.0) == 4.0
    assert quantile(values, 0.5) == 2.5
    assert quantile(values, 0.25) == pytest.approx(1.75)


def _synthetic(n: int, p_a: float, p_b: float, seed: int) -> tuple[list[float], list[float]]:
    """Tasks solved independently with probability p_a by run A and p_b by run B."""
    rng = random.Random(seed)
    return ([float(rng.random() < p_a) for _ in range(n)],
            [float(rng.random() < p_b) for _ in range(n)])


def _known(n: int, seed: int) -> tuple[list[float], list[float]]:
    """n tasks (a multiple of 10), in a seeded order: 40% solved by both runs, 10% by A only,
    30% by B only, 20% by neither: A solves 50%, B 70%, a difference of exactly 0.2."""
    pairs = [(1.0, 1.0)] * (4 * n // 10) + [(1.0, 0.0)] * (n // 10) + \
        [(0.0, 1.0)] * (3 * n // 10) + [(0.0, 0.0)] * (2 * n // 10)
    random.Random(seed).shuffle(pairs)
    return [a for a, _ in pairs], [b for _, b in pairs]


def test_the_bootstrap_interval_covers_a_known_difference_and_narrows_with_n() -> None:
    widths = {}
    for n in (100, 400, 1600):
        a, b = _known(n, seed=n)
        got = bootstrap_diff(a, b, resamples=2000, seed=1)
        assert got.diff == pytest.approx(0.2)
        assert got.low < 0.2 < got.high, (n, got)
        # Its width is that of the normal interval on the paired differences (the bootstrap
        # distribution of a mean): 2 · 1.96 · sd(d) / sqrt(n), sd(d)² = 0.4 - 0.2² = 0.36.
        widths[n] = got.high - got.low
        assert widths[n] == pytest.approx(2 * 1.96 * 0.6 / math.sqrt(n), rel=0.1), (n, widths[n])
    # Four times the tasks, half the width (1/sqrt(n)), within the resampling error.
    assert 0.4 < widths[400] / widths[100] < 0.6
    assert 0.4 < widths[1600] / widths[400] < 0.6


def test_the_bootstrap_interval_covers_the_truth_about_as_often_as_it_says() -> None:
    """Datasets drawn at random around a true difference of 0.2: ~95% of intervals hold it."""
    covered = 0
    datasets = 80
    for seed in range(datasets):
        a, b = _synthetic(60, 0.4, 0.6, seed=1000 + seed)
        got = bootstrap_diff(a, b, resamples=400, seed=seed)
        covered += got.low <= 0.2 <= got.high
    assert covered / datasets >= 0.85  # nominal 0.95; percentile intervals run a bit short


def test_the_bootstrap_is_seeded_and_paired() -> None:
    rng = random.Random(3)
    a, b = [rng.random() for _ in range(200)], [rng.random() for _ in range(200)]  # rewards
    assert bootstrap_diff(a, b, seed=7) == bootstrap_diff(a, b, seed=7)
    assert bootstrap_diff(a, b, seed=7) != bootstrap_diff(a, b, seed=8)
    # Pairing: a run against itself shifted by a constant differs by exactly that constant.
    same = bootstrap_diff(a, [x + 0.25 for x in a])
    assert (same.diff, same.low, same.high) == (0.25, 0.25, 0.25)
    # The same tasks in another order are the same comparison (up to resampling noise).
    order = list(range(200))
    random.Random(5).shuffle(order)
    shuffled = bootstrap_diff([a[i] for i in order], [b[i] for i in order])
    assert shuffled.diff == pytest.approx(bootstrap_diff(a, b).diff)
    with pytest.raises(ValueError, match="same, non-zero length"):
        bootstrap_diff([1.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="resamples"):
        bootstrap_diff([1.0], [0.0], resamples=0)


def _attempt(resolved: bool, reward: float | None = None) -> Attempt:
    return Attempt(resolved, float(resolved) if reward is None else reward, 0.01, 2, 100, 1.0, ())


def test_a_tasks_outcome_over_its_attempts() -> None:
    assert task_values([_attempt(True), _attempt(False), _attempt(False), _attempt(True)]) == {
        "pass_at_1": 0.5, "solved": 1.0, "reward": 0.5}
    assert task_values([_attempt(False, 0.25), _attempt(False, 0.75)]) == {
        "pass_at_1": 0.0, "solved": 0.0, "reward": 0.5}
    assert task_values([_attempt(True)]) == {"pass_at_1": 1.0, "solved": 1.0, "reward": 1.0}
