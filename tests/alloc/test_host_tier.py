"""The host tier's plan: what is held in host memory, what stays mapped, and when the engine refuses."""

import pytest

from engine.alloc.host_tier import GiB, STAGING_ROWS, host_allowance, plan_host_tier, reserve_bytes, staging_rows
from engine.errors import HostMemoryError

ROW = 1000


def test_everything_held_when_it_fits():
    tier = plan_host_tier([1, 3], 4, ROW, 8 * ROW, can_map=True)
    assert tier.is_complete and tier.in_memory == {1: (0, 1, 2, 3), 3: (0, 1, 2, 3)}
    assert (tier.in_memory_bytes, tier.mapped_bytes, tier.staging_rows) == (8 * ROW, 0, 0)


def test_past_the_allowance_rows_are_held_in_layer_order_and_the_rest_mapped():
    tier = plan_host_tier([1, 3], 16, ROW, (STAGING_ROWS + 17) * ROW + ROW // 2, can_map=True)
    assert tier.in_memory == {1: tuple(range(16)), 3: (0,)}
    assert tier.num_mapped == 15 and tier.mapped_bytes == 15 * ROW
    assert tier.in_memory_bytes == (17 + STAGING_ROWS) * ROW  # staging counts against the allowance


def test_use_counts_pick_the_most_used_rows():
    counts = {1: [0, 9, 0, 1] + [0] * 12, 3: [5, 0, 9] + [0] * 13}
    tier = plan_host_tier([1, 3], 16, ROW, (STAGING_ROWS + 3) * ROW, can_map=True, use_counts=counts)
    assert tier.in_memory == {1: (1,), 3: (0, 2)}  # 9, 9 (layer order breaks the tie), then 5


def test_a_mode_that_cannot_map_is_refused_with_the_way_out():
    with pytest.raises(HostMemoryError, match="--experts paged"):
        plan_host_tier([1], 4, ROW, 3 * ROW, can_map=False)


def test_less_than_the_staging_rows_is_refused():
    with pytest.raises(HostMemoryError, match="--host-budget"):
        plan_host_tier([1], 16, ROW, STAGING_ROWS * ROW - 1, can_map=True)
    assert plan_host_tier([1], 16, ROW, STAGING_ROWS * ROW, can_map=True).num_in_memory == 0


def test_a_layer_of_few_experts_stages_no_more_rows_than_it_has():
    assert staging_rows(4) == 4 and staging_rows(128) == STAGING_ROWS
    tier = plan_host_tier([1, 2], 4, ROW, 5 * ROW, can_map=True)
    assert tier.staging_rows == 4 and tier.in_memory == {1: (0,), 2: ()}


def test_the_allowance_is_the_cap_within_available_ram_less_the_reserve():
    total = 64 * GiB
    assert reserve_bytes(total) == 8 * GiB and reserve_bytes(8 * GiB) == 2 * GiB
    assert host_allowance(None, 40 * GiB, total) == 32 * GiB
    assert host_allowance(10 * GiB, 40 * GiB, total) == 10 * GiB
    assert host_allowance(100 * GiB, 40 * GiB, total) == 32 * GiB
    assert host_allowance(None, 4 * GiB, total) == 0
