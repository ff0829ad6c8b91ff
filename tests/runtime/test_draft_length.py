"""The draft-length rule: the k that maximises expected tokens per second of step time."""

import pytest

from engine.generation.speculative.draft_length import (MAX_REMEASURE_AFTER, PROBE_INTERVAL, REMEASURE_AFTER,
                                                        DraftLength, expected_tokens)


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


def drive(rule: DraftLength, num_choices: int, step_time, accepted) -> list[int]:
    """Choices of a run whose verify steps take step_time(q, choice) and accept accepted(k, choice) drafts."""
    choices = []
    for choice in range(num_choices):
        k = rule.choose()
        choices.append(k)
        if k:
            rule.observe_step(1 + k, step_time(1 + k, choice))
            rule.observe_drafts(k, accepted(k, choice))
    return choices


def test_a_slow_first_verify_step_does_not_stop_drafting_for_good():
    """The first verify step (k = 8) is 20x slow, as on a loaded machine: the fit's slope says drafts do not pay and
    probes of one draft cannot correct it; the step times are measured again and drafting resumes."""
    rule = DraftLength(8)
    choices = drive(rule, 400, lambda q, choice: 20.0 if choice == 0 else 1.0 + 0.05 * (q - 1),
                    lambda k, choice: k if choice % 5 else k // 2)
    assert choices[:2] == [8, 1] and set(choices[2:REMEASURE_AFTER]) <= {0, 1}  # the outlier declines at first
    resumed = next(i for i in range(2, len(choices)) if choices[i] == 8)
    assert resumed <= REMEASURE_AFTER + 4
    after = choices[resumed:]
    assert 0 not in after and after.count(8) >= 0.95 * len(after)  # the cap, as the true cost says (and a 1 where
    # the fit, all of one q for a while, times a second length again)


def test_re_measures_are_rare_where_drafts_do_not_pay():
    rule = DraftLength(8)
    choices = drive(rule, 4000, lambda q, choice: 1.0 + 0.5 * (q - 1), lambda k, choice: 0)
    remeasures = choices.count(8) - 1  # the first is the start's measure
    assert 1 <= remeasures <= 2 + (4000 - 1024) // MAX_REMEASURE_AFTER + 4
    assert choices.count(0) >= 0.9 * len(choices)


def test_drafting_time_counts_in_each_drafts_cost():
    free, costly = DraftLength(8), DraftLength(8)
    for rule in (free, costly):
        timed(rule, base=1.0, per_position=0.05)
        for _ in range(50):
            rule.observe_drafts(4, 2)  # a = 2/3: drafts pay where one costs 0.05 of a step, not where 0.95
    free.observe_drafting(1, 0.0)
    for _ in range(20):
        costly.observe_drafting(1, 0.9)
    assert free.choose() >= 1
    assert costly.choose() == 0


def test_plain_steps_as_the_engine_runs_them_are_the_bar():
    """Verify steps of t(q) = 1 + 0.2 (q - 1) at a = 1/2 beat t(1) = 1 (k = 2: 1.75 tokens in 1.4), not plain steps
    of 0.7 that run ahead of the step before them (1.43 tokens per unit against 1.25)."""
    rule = DraftLength(8)
    timed(rule, base=1.0, per_position=0.2)
    assert rule.acceptance == 0.5
    assert rule.choose() > 0
    for _ in range(20):
        rule.observe_plain(0.7)
    assert rule.choose() == 0


def test_drafts_stop_where_a_verify_step_would_leave_a_small_step():
    from engine.alloc.memory_plan import GATHER_LIMIT_BYTES
    from engine.alloc.memory_plan import small_step_drafts

    q4 = 3 * 2048 * 768 * 144 // 256  # a Qwen3-30B-A3B expert in Q4_K: 64 entries of a small step are 8 rows of 8
    assert small_step_drafts(8, 8, q4) == 7
    assert small_step_drafts(5, 8, q4) == 5
    assert small_step_drafts(8, 4, q4) == 8  # 9 rows of 4: 36 entries
    assert small_step_drafts(8, 8, 3 * 2048 * 768 * 2) == 3  # bf16: 320 MiB of gathered experts hold 34 entries
    assert small_step_drafts(8, 8, GATHER_LIMIT_BYTES) == 1  # never none
