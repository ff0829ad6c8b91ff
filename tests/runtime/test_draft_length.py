"""The draft-length rule: the k that maximises expected tokens per second of step time."""

import pytest

from engine.generation.speculative.draft_length import PROBE_INTERVAL, DraftLength, expected_tokens


def test_expected_tokens_of_the_geometric_model():
    assert expected_tokens(0.0, 5) == 1.0
    assert expected_tokens(0.5, 1) == pytest.approx(1.5)
    assert expected_tokens(0.5, 2) == pytest.approx(1.75)
    assert expected_tokens(1.0, 4) == 5.0


def timed(rule: DraftLength, base: float, per_position: float, ks=(0, 1, 2, 4)) -> None:
    for _ in range(10):
        for k in ks:
            rule.observe_step(1 + k, base + k * per_position)


def test_until_the_cost_is_measured_the_cap_and_one_alternate():
    rule = DraftLength(6)
    assert [rule.choose() for _ in range(4)] == [6, 1, 6, 1]
    timed(rule, base=1.0, per_position=0.01, ks=(0, 5))
    for _ in range(50):
        rule.observe_drafts(4, 4)
    assert rule.choose() == 6


def test_cheap_positions_and_high_acceptance_take_the_cap():
    rule = DraftLength(8)
    timed(rule, base=1.0, per_position=0.01)
    for _ in range(50):
        rule.observe_drafts(4, 4)
    assert rule.acceptance > 0.9
    assert rule.choose() == 8


def test_drafts_that_do_not_pay_are_declined_but_probed():
    rule = DraftLength(8)
    timed(rule, base=1.0, per_position=0.5)  # each position costs half a step: misses of a growing union
    for _ in range(50):
        rule.observe_drafts(4, 0)
    choices = [rule.choose() for _ in range(4 * PROBE_INTERVAL)]
    assert choices.count(1) == 4 and choices.count(0) == 4 * PROBE_INTERVAL - 4


def test_costly_positions_with_some_acceptance_take_one():
    rule = DraftLength(8)
    timed(rule, base=1.0, per_position=0.5)
    for _ in range(50):
        rule.observe_drafts(4, 3)  # a = 3/4: one draft 1.75 tokens in 1.5 steps' time, two 2.31 in 2, three 2.73 in 2.5
    assert rule.acceptance == pytest.approx(0.75, abs=0.02)
    assert rule.choose() == 1


def test_the_choice_is_the_best_rate():
    rule = DraftLength(8)
    timed(rule, base=1.0, per_position=0.2)
    for _ in range(100):
        rule.observe_drafts(3, 2)  # acceptance about 2/3
    a = rule.acceptance
    rates = {k: expected_tokens(a, k) / (1.0 + 0.2 * k) for k in range(1, 9)}
    assert rule.choose() == max(rates, key=rates.get)
    assert 1 < rule.choose() < 8
