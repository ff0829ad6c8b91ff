"""Re-split the device budget at a drained barrier (no sequence running): the budget slider now, the online
controller later. The side that gives bytes shrinks first, so the budget holds at every moment; cached
chat prefixes that still fit survive a KV resize."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Protocol

import torch

from engine.alloc.memory_plan import MemoryPlan, ModelSizes, PlanRequest, plan_memory
from engine.errors import BudgetError
from engine.generation.plan_event import PlanEvent
from engine.runtime.model_runner import ModelRunner
from engine.runtime.scheduler import Scheduler


class Replanner:
    def __init__(self, sizes: ModelSizes, request: PlanRequest):
        self.sizes, self.request = sizes, request

    def plan_for_budget(self, budget_bytes: int | None) -> MemoryPlan:
        return plan_memory(self.sizes, replace(self.request, budget_bytes=budget_bytes, expert_slots=None,
                                               kv_blocks=None))


class Resplittable(Protocol):
    """What a re-split reads and changes of the engine (engine.runtime.llm_engine.LLMEngine has it); a protocol,
    so that the engine loop imports this module and not the other way round."""

    plan: MemoryPlan
    replanner: Replanner
    runner: ModelRunner
    scheduler: Scheduler
    device: torch.device


def check_live_change(old: MemoryPlan, new: MemoryPlan) -> None:
    same_experts = old.layer_slots == new.layer_slots and old.offloaded_layers == new.offloaded_layers
    if not old.mode.can_resplit and not same_experts:
        raise BudgetError(f"this budget needs a different expert layout; live changes need --experts paged "
                          f"(the model runs with --experts {old.mode})")


def apply_plan(engine: Resplittable, new: MemoryPlan) -> None:
    """Move bytes between the expert slots and the KV pool. Call only when no sequence holds KV blocks."""
    old = engine.plan
    check_live_change(old, new)
    if new.kv_blocks < old.kv_blocks:
        resize_kv(engine, new.kv_blocks)
    if engine.runner.padded_decode is not None:
        engine.runner.padded_decode.invalidate()  # drop captured graphs (and their memory) before the pool moves
    if old.mode.can_resplit:  # the other modes' layouts are fixed (check_live_change)
        engine.runner.experts.resize(new.layer_slots)
    if new.kv_blocks > old.kv_blocks:
        resize_kv(engine, new.kv_blocks)
    if engine.device.type == "cuda":
        torch.cuda.empty_cache()
    engine.plan = new


def resize_kv(engine: Resplittable, num_blocks: int) -> None:
    manager = engine.scheduler.block_manager
    moves = manager.resize(num_blocks)
    engine.runner.cache.resize(num_blocks * manager.block_size, moves, manager.block_size)
    if engine.runner.padded_decode is not None:
        engine.runner.padded_decode.invalidate()  # its graphs read the old KV tensors


def budget_change(engine: Resplittable, budget_bytes: int | None, reason: str) -> PlanEvent:
    try:
        new = engine.replanner.plan_for_budget(budget_bytes)
    except BudgetError as err:
        return PlanEvent(time.time(), engine.plan, None, reason, error=str(err))
    return plan_change(engine, new, reason)


def plan_change(engine: Resplittable, new: MemoryPlan, reason: str) -> PlanEvent:
    old = engine.plan
    started = time.perf_counter()
    try:
        apply_plan(engine, new)
    except BudgetError as err:
        return PlanEvent(time.time(), old, None, reason, error=str(err))
    if engine.device.type == "cuda":
        torch.cuda.synchronize(engine.device)
    return PlanEvent(time.time(), old, new, reason, stall_s=time.perf_counter() - started)
