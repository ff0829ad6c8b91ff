"""The budget is a hard limit: plans fit it, and a budget below the minimum is refused with the minimum."""

import pytest

from engine.alloc.memory_plan import GiB, MiB, ModelSizes, PlanRequest, minimum_budget, plan_memory
from engine.errors import BudgetError
from engine.units import format_bytes

QWEN3_30B = ModelSizes(dense_bytes=3 * GiB, expert_bytes=9 * MiB, num_moe_layers=48, num_experts=128, top_k=8,
                       kv_bytes_per_token=96 * 1024, hidden_size=2048, vocab_size=151936, dtype_bytes=2, num_layers=48)


def request(mode="paged", budget=12 * GiB, **kw):
    return PlanRequest(mode=mode, budget_bytes=budget, block_size=16, max_model_len=4096, max_num_seqs=1,
                       max_batched_tokens=4096, **kw)


@pytest.mark.parametrize("budget_gib", [8, 12, 16, 24, 32, 48])
def test_paged_plan_fits_budget_and_gives_experts_the_rest(budget_gib):
    plan = plan_memory(QWEN3_30B, request(budget=budget_gib * GiB))
    assert plan.total_bytes <= budget_gib * GiB
    assert 8 <= plan.min_layer_slots <= 128
    assert plan.kv_bytes >= GiB // 2
    if plan.min_layer_slots < 128:
        assert plan.free_bytes < 48 * QWEN3_30B.expert_bytes + plan.kv_block_bytes  # nothing useful left over


def test_budget_below_minimum_names_the_minimum():
    minimum = minimum_budget(QWEN3_30B, request())
    assert plan_memory(QWEN3_30B, request(budget=minimum)).min_layer_slots == 8
    with pytest.raises(BudgetError, match=f"minimum is {format_bytes(minimum)}"):
        plan_memory(QWEN3_30B, request(budget=minimum - 10 * MiB))


def test_resident_refuses_a_model_larger_than_the_budget_and_suggests_paging():
    with pytest.raises(BudgetError, match="--experts paged"):
        plan_memory(QWEN3_30B, request(mode="resident", budget=24 * GiB))
    assert plan_memory(QWEN3_30B, request(mode="resident", budget=80 * GiB)).min_layer_slots == 128


def test_static_offloads_the_leading_layers_that_do_not_fit():
    plan = plan_memory(QWEN3_30B, request(mode="static", budget=24 * GiB))
    layer = 128 * 9 * MiB
    assert 0 < plan.offloaded_layers < 48
    assert plan.expert_device_bytes == (48 - plan.offloaded_layers + 1) * layer
    assert plan.total_bytes <= 24 * GiB


def test_expert_slots_override_and_kv_gets_the_rest():
    plan = plan_memory(QWEN3_30B, request(expert_slots=16, budget=16 * GiB))
    assert plan.min_layer_slots == 16
    assert plan.total_bytes <= 16 * GiB and plan.free_bytes < plan.kv_block_bytes
    with pytest.raises(BudgetError):
        plan_memory(QWEN3_30B, request(expert_slots=128, budget=16 * GiB))
