"""The context policies on their own: whole turns go, the last turn stays, the cheapest fit wins."""

import pytest

from app.chat.context_fit import ContextFullError, fit_context, turn_starts

ROLES = ["user", "assistant"] * 5 + ["user"]  # five answered turns and the question being sent
SIZES = [10, 30] * 5 + [10]


def count(kept):
    return 5 + sum(SIZES[i] for i in kept)  # the system prompt and template: 5 tokens


def test_everything_is_sent_while_it_fits():
    fit = fit_context(ROLES, count, 1000, "drop_oldest")
    assert fit.kept == tuple(range(len(ROLES))) and fit.dropped is None and fit.num_tokens == 215


def test_drop_oldest_leaves_out_the_fewest_old_turns():
    fit = fit_context(ROLES, count, 140, "drop_oldest")
    assert fit.dropped == (0, 4) and fit.num_tokens == 135 and fit.kept[0] == 4


def test_truncate_middle_keeps_the_first_turn():
    fit = fit_context(ROLES, count, 140, "truncate_middle")
    assert fit.dropped == (2, 6) and fit.kept[:2] == (0, 1) and fit.num_tokens == 135


def test_stop_says_so_with_the_numbers():
    with pytest.raises(ContextFullError, match="215 tokens .* holds 140"):
        fit_context(ROLES, count, 140, "stop")


def test_the_last_message_alone_too_long_is_refused_under_every_policy():
    for policy in ("drop_oldest", "truncate_middle"):
        with pytest.raises(ContextFullError, match="this message alone .* has 15 tokens"):
            fit_context(ROLES, count, 12, policy)


def test_the_hard_limit_is_used_when_no_room_for_the_reply_is_left():
    fit = fit_context(ROLES, count, 12, "drop_oldest", hard_limit=20)
    assert fit.kept == (10,) and fit.num_tokens == 15


def test_turns_start_at_each_question():
    assert turn_starts(["user", "assistant", "user", "user", "assistant"]) == [0, 2]
