"""The online controller: re-shares slots by recent per-layer miss curves, sizes KV from use, has a deadzone."""

import threading
from dataclasses import replace

import pytest

from engine.alloc.cost_model import LinkCost
from engine.alloc.memory_plan import GiB, MemoryPlan, MiB
from engine.alloc.online_controller import OnlineController
from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.runtime.replan import apply_plan

LINK = LinkCost(h2d_bytes_per_s=50e9, per_miss_s=0.0, dense_step_s=0.01, prefill_token_s=0.0)


def plan(layer_slots=(8, 8), kv_blocks=100) -> MemoryPlan:
    return MemoryPlan(mode="paged", budget_bytes=4 * GiB, dense_bytes=GiB, expert_bytes=10 * MiB,
                      num_moe_layers=2, offloaded_layers=0,
                      static_resident_bytes=0, kv_blocks=kv_blocks, kv_block_bytes=10 * MiB,
                      workspace_bytes=0, layer_slots=layer_slots)


def feed(controller, cycles=(2, 12), steps=200):
    for step in range(steps):
        for layer, cycle in enumerate(cycles):
            controller.observe_routing(layer, [step % cycle], is_decode=True)


def test_slots_move_to_the_layer_whose_working_set_needs_them():
    controller = OnlineController(num_experts=16, top_k=1, kv_floor_bytes=50 * 10 * MiB, link=LINK, resize_s=0.0)
    feed(controller)
    controller.observe_kv(used_blocks=20)
    decision = controller.decide(plan())
    assert decision is not None
    new = decision.plan
    assert new.layer_slots[1] >= 12 and new.layer_slots[0] >= 2
    assert new.expert_device_bytes + new.kv_bytes == plan().expert_device_bytes + plan().kv_bytes  # same pool
    assert new.kv_bytes >= 50 * 10 * MiB  # never below the floor
    assert "tok/s" in decision.reason


def test_deadzone_and_too_little_evidence_change_nothing():
    controller = OnlineController(num_experts=16, top_k=1, kv_floor_bytes=50 * 10 * MiB, link=LINK, resize_s=0.0)
    assert controller.decide(plan()) is None  # nothing observed yet
    feed(controller)
    first = controller.decide(plan()).plan
    feed(controller)
    assert controller.decide(first) is None


PROMPTS = ["def fib(n):", "The quick brown fox", "class Stack:\n    def"]


REFERENCE_TOKENS = 48


@pytest.fixture(scope="module")
def resident_tokens(tiny_model_dir):
    """The reference: each of PROMPTS alone, every expert resident, greedy; a shorter run's tokens are a prefix."""
    sampling = SamplingParams(max_tokens=REFERENCE_TOKENS, ignore_eos=True)
    with Engine(EngineOptions(model=str(tiny_model_dir("qwen3_moe")), device="cpu")) as resident:
        return [resident.generate(GenerateRequest(prompt=p, sampling=sampling)).token_ids for p in PROMPTS]


def test_engine_controller_acts_at_drained_barriers_with_identical_outputs(tiny_model_dir, resident_tokens):
    folder = str(tiny_model_dir("qwen3_moe"))
    sampling = SamplingParams(max_tokens=REFERENCE_TOKENS, ignore_eos=True)
    expected = resident_tokens
    events, arrived = [], threading.Event()
    options = EngineOptions(model=folder, device="cpu", experts="paged", budget_bytes=GiB, block_size=4)
    with Engine(options) as engine:
        core = engine._core  # idle engine thread: start from a deliberately starved split
        apply_plan(core, replace(core.plan, layer_slots=(2, 2)))
        core.controller.min_steps, core.controller.resize_s = 4, 0.0
        engine.add_plan_listener(lambda e: (events.append(e), arrived.set()))
        results = [engine.generate(GenerateRequest(prompt=p, sampling=sampling)) for p in PROMPTS]
        assert arrived.wait(10)
    assert [r.token_ids for r in results] == expected
    assert events and all(e.error is None and "recent routing" in e.reason for e in events)
    assert all(0 < e.stall_s < 30 for e in events)  # how long each re-split held the engine
    assert events[0].old.layer_slots == (2, 2) and min(events[0].new.layer_slots) > 2
    assert all(e.new.total_bytes <= GiB for e in events)


def test_predicted_curve_rises_with_the_expert_share():
    from engine.alloc.online_controller import predicted_curve

    controller = OnlineController(num_experts=16, top_k=1, kv_floor_bytes=50 * 10 * MiB, link=LINK, resize_s=0.0)
    assert predicted_curve(controller, plan()) is None
    feed(controller, cycles=(6, 12))
    points = predicted_curve(controller, plan())
    shares, speeds = zip(*points)
    assert list(shares) == sorted(shares) and 0 < shares[0] < shares[-1] <= 1
    assert all(b >= a - 1e-9 for a, b in zip(speeds, speeds[1:])) and speeds[-1] > speeds[0]


def test_engine_publishes_the_curve_after_a_reply(tiny_model_dir):
    options = EngineOptions(model=str(tiny_model_dir("qwen3_moe")), device="cpu", experts="paged", budget_bytes=GiB)
    with Engine(options) as engine:
        assert engine.stats().wsa_curve is None
        engine.generate(GenerateRequest(prompt="def fib(n):", sampling=SamplingParams(max_tokens=8, ignore_eos=True)))
        engine.set_budget(GiB)  # a round trip through the engine thread: the barrier after the reply has run
        for _ in range(100):
            if engine.stats().wsa_curve:
                break
            threading.Event().wait(0.05)
        assert engine.stats().wsa_curve


def test_waiting_requests_grow_kv_at_once_without_evidence_or_deadzone():
    controller = OnlineController(num_experts=16, top_k=1, kv_floor_bytes=5 * 10 * MiB, link=LINK)
    small = plan(layer_slots=(8, 8), kv_blocks=10)
    assert controller.decide(small, waiting_blocks=10) is None  # they fit: nothing urgent, no evidence yet
    decision = controller.decide(small, waiting_blocks=14)  # 4 blocks more than the pool holds
    assert decision is not None and "waiting requests need 14" in decision.reason
    new = decision.plan
    assert new.kv_blocks >= 14 and sum(new.layer_slots) < 16  # the experts gave the bytes
    assert new.expert_device_bytes + new.kv_bytes == small.expert_device_bytes + small.kv_bytes
    nothing_left = plan(layer_slots=(1, 1), kv_blocks=10)  # top_k slots per layer: nothing more to give
    assert controller.decide(nothing_left, waiting_blocks=50) is None


def test_kv_shrinks_to_the_one_request_floor_when_use_is_low():
    """The offline split keeps concurrency x max context of KV; the controller's floor is one request's."""
    controller = OnlineController(num_experts=16, top_k=1, kv_floor_bytes=20 * 10 * MiB, link=LINK, resize_s=0.0)
    feed(controller)
    controller.observe_kv(used_blocks=4)
    generous = plan(layer_slots=(4, 4), kv_blocks=30)
    new = controller.decide(generous).plan
    assert 20 <= new.kv_blocks < 30 and sum(new.layer_slots) > 8


def test_a_burst_gets_kv_before_admission_with_identical_outputs(tiny_model_dir, resident_tokens):
    folder = str(tiny_model_dir("qwen3_moe"))
    sampling = SamplingParams(max_tokens=24, ignore_eos=True)
    expected = [tokens[:24] for tokens in resident_tokens]
    events = []
    options = EngineOptions(model=folder, device="cpu", experts="paged", budget_bytes=GiB, block_size=4,
                            max_num_seqs=4)
    with Engine(options) as engine:
        core = engine._core  # idle engine thread: a KV pool too small for the burst (one request's worth)
        apply_plan(core, replace(core.plan, kv_blocks=10))
        core.controller.kv_floor_bytes = 10 * core.plan.kv_block_bytes
        engine.add_plan_listener(events.append)
        handles = engine.submit_batch([GenerateRequest(prompt=p, sampling=sampling) for p in PROMPTS])
        results = [h.result() for h in handles]
        assert core.plan.kv_blocks >= 3 * 8  # three requests of up to 32 tokens in blocks of 4
    assert [r.token_ids for r in results] == expected
    grown = [e for e in events if "waiting requests need" in e.reason]
    assert grown and grown[0].error is None and grown[0].old.kv_blocks == 10 and grown[0].new.kv_blocks >= 24


def test_the_miss_curves_come_from_decode_steps():
    """A prefill step touches most experts at once; decode reuse alone decides what slots are worth."""
    decode_only = OnlineController(num_experts=16, top_k=1, kv_floor_bytes=50 * 10 * MiB, link=LINK, resize_s=0.0)
    mixed = OnlineController(num_experts=16, top_k=1, kv_floor_bytes=50 * 10 * MiB, link=LINK, resize_s=0.0)
    feed(decode_only)
    for chunk in range(4):
        for layer in range(2):
            mixed.observe_routing(layer, list(range(16)), is_decode=False)
        feed(mixed, steps=50)
    for a, b in zip(decode_only.profile().hit_rates, mixed.profile().hit_rates):
        assert abs(a - b).max() < 0.05
    prefill_only = OnlineController(num_experts=16, top_k=1, kv_floor_bytes=50 * 10 * MiB, link=LINK, resize_s=0.0)
    prefill_only.observe_routing(0, list(range(16)), is_decode=False)
    assert prefill_only.profile().hit_rates.shape == (1, 17)  # no decode yet: the prefill steps are all there is


def test_the_controller_sees_every_decode_step_before_it_decides(tiny_model_dir):
    """Graphed decode steps keep their routing on the device until someone reads it; a barrier drains it before
    the controller decides (the engine core alone: no stats poll of the API thread drains it for the barrier).
    The whole-step path runs eagerly here, its kernels in Triton's interpreter."""
    from engine.launch import build_engine
    from engine.runtime.decode_graphs import WholeStepOptions

    options = EngineOptions(model=str(tiny_model_dir("qwen3_moe")), device="cpu", experts="paged", budget_bytes=GiB,
                            decode="static")
    core, _ = build_engine(options)
    core.runner.padded_decode.set_whole_options(WholeStepOptions(eager=True))
    seen, decide = [], core.controller.decide

    def counting_decide(plan, waiting_blocks=0):
        seen.append(sum(is_decode for _, is_decode in next(iter(core.controller.windows.values()))))
        return decide(plan, waiting_blocks)

    core.controller.decide = counting_decide
    core.add(GenerateRequest(prompt="def fib(n):", sampling=SamplingParams(max_tokens=12, ignore_eos=True)))
    while core.has_work:
        core.step()
    assert core.runner.experts.device_pager.owner == "device"  # the decode steps ran graphed
    core.at_barrier()
    assert seen == [11]  # the first token comes from the prefill, the other 11 from decode steps


def test_a_move_must_pay_for_the_stall_of_a_re_split():
    """Giving KV to the experts is worth it only if the predicted saving over the recent decode stretch beats
    the stall; growing KV for what requests used is not weighed."""
    def controller():
        return OnlineController(num_experts=16, top_k=1, kv_floor_bytes=20 * 10 * MiB, link=LINK, resize_s=0.05)

    generous = plan(layer_slots=(4, 4), kv_blocks=30)
    short = controller()
    feed(short, steps=40)  # layer 1 misses every step at 4 slots; a decode stretch of 40 steps
    short.observe_kv(used_blocks=4)
    assert short.decide(generous) is None  # 40 x ~0.2 ms saved < 50 ms of stall
    long = controller()
    feed(long, steps=400)
    long.observe_kv(used_blocks=4)
    decision = long.decide(generous)
    assert decision is not None and decision.plan.kv_blocks < 30  # 400 steps pay for it
    busy = controller()
    feed(busy, steps=40)
    busy.observe_kv(used_blocks=40)  # the pool was too small: KV grows whatever decode loses
    grown = busy.decide(plan(layer_slots=(8, 8), kv_blocks=30))
    assert grown is not None and grown.plan.kv_blocks > 30  # as far as the top_k slots per layer allow


def test_a_chat_after_a_burst_gets_its_slots_before_it_starts():
    """At an admission barrier the controller knows the decode steps the waiting requests will run: a move that
    the short stretch since the last re-split cannot pay for is made when the known work ahead pays for it."""
    def controller():
        made = OnlineController(num_experts=16, top_k=1, kv_floor_bytes=20 * 10 * MiB, link=LINK, resize_s=0.05)
        feed(made, steps=40)  # a short decode stretch (the burst's), layer 1 missing every step at 4 slots
        made.observe_kv(used_blocks=4)
        return made

    generous = plan(layer_slots=(4, 4), kv_blocks=30)
    assert controller().decide(generous, waiting_blocks=2, upcoming_steps=0) is None
    assert controller().decide(generous, waiting_blocks=2, upcoming_steps=20) is None  # 60 steps do not pay
    decision = controller().decide(generous, waiting_blocks=2, upcoming_steps=400)
    assert decision is not None and decision.plan.kv_blocks < 30 and sum(decision.plan.layer_slots) > 8
    assert "400 decode steps the waiting requests will run" in decision.reason


def test_kv_keeps_headroom_above_its_peak_only_after_a_preemption():
    """A burst that fitted the pool keeps what it used; one that preempted gets the headroom on top."""
    def controller():
        made = OnlineController(num_experts=16, top_k=1, kv_floor_bytes=5 * 10 * MiB, link=LINK, resize_s=0.0)
        feed(made, cycles=(4, 4))  # 4 slots per layer hold every layer's working set: slots gain nothing
        return made

    full = plan(layer_slots=(8, 8), kv_blocks=20)
    fitted = controller()
    fitted.observe_kv(used_blocks=20, preemptions=3)  # preemptions before the controller's last decision...
    fitted.decide(full)
    fitted.observe_kv(used_blocks=20, preemptions=3)  # ...do not count again: this burst fitted
    kept = fitted.decide(full)
    assert kept is None or kept.plan.kv_blocks <= 20
    preempted = controller()
    preempted.observe_kv(used_blocks=20, preemptions=1)
    grown = preempted.decide(full)
    assert grown is not None and grown.plan.kv_blocks >= 25  # 20 x (1 + 0.25)


def test_the_routing_profile_is_computed_once_per_new_evidence():
    controller = OnlineController(num_experts=16, top_k=1, kv_floor_bytes=50 * 10 * MiB, link=LINK)
    feed(controller, steps=20)
    first = controller.profile()
    assert controller.profile() is first  # an admission barrier right after a drained one: nothing new
    controller.observe_routing(0, [5], is_decode=True)
    assert controller.profile() is not first
