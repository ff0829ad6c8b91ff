"""The online MV-WSA controller (torch-free): watches recent routing (per-layer sliding windows of each
step's unique experts) and KV use, and at drained barriers proposes a new split of the expert/KV pool.

KV target = max(kappa_min, peak KV in use since the last decision x (1 + headroom), what waiting requests
need); experts get the rest, shared between layers by their recent miss curves. A deadzone (no layer moves
by more than one slot and KV by less than a slot's bytes) prevents oscillation."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

import numpy as np

from engine.alloc.cost_model import LinkCost, RoutingProfile, decode_step_s
from engine.alloc.memory_plan import MemoryPlan
from engine.alloc.miss_curve import hit_rate_curve, stack_depths
from engine.alloc.mvwsa import greedy_layers, greedy_steps


@dataclass(frozen=True)
class Decision:
    plan: MemoryPlan
    reason: str


class OnlineController:
    def __init__(self, num_experts: int, top_k: int, kv_floor_bytes: int, link: LinkCost,
                 window_steps: int = 256, headroom: float = 0.25, min_steps: int = 32):
        self.num_experts, self.top_k = num_experts, top_k
        self.kv_floor_bytes, self.link = kv_floor_bytes, link
        self.headroom, self.min_steps = headroom, min_steps
        self.windows: dict[int, deque] = {}
        self.window_steps = window_steps
        self.new_steps = 0
        self.peak_kv_blocks = 0

    def observe_routing(self, layer: int, needed: list[int], is_decode: bool) -> None:
        window = self.windows.setdefault(layer, deque(maxlen=self.window_steps))
        window.append((np.asarray(needed, dtype=np.int64), is_decode))
        self.new_steps += 1

    def observe_kv(self, used_blocks: int) -> None:
        self.peak_kv_blocks = max(self.peak_kv_blocks, used_blocks)

    def profile(self) -> RoutingProfile:
        layers = sorted(self.windows)
        curves = [hit_rate_curve(stack_depths((e for e, _ in self.windows[l]), self.num_experts), self.num_experts)
                  for l in layers]
        accesses = [np.mean([e.size for e, decode in self.windows[l] if decode] or [self.top_k]) for l in layers]
        return RoutingProfile(np.stack(curves), np.asarray(accesses), 1.0, self.num_experts, self.top_k)

    def decide(self, plan: MemoryPlan, waiting_blocks: int = 0) -> Decision | None:
        """A better plan for the recent workload, or None (too little new evidence, or inside the deadzone)."""
        enough = self.windows and self.new_steps >= self.min_steps * len(self.windows)
        if plan.mode != "paged" or plan.budget_bytes is None or not enough:
            return None
        pool = plan.expert_device_bytes + plan.kv_bytes
        kv_target = max(self.kv_floor_bytes, int(self.peak_kv_blocks * (1 + self.headroom)) * plan.kv_block_bytes,
                        waiting_blocks * plan.kv_block_bytes)
        total_slots = (pool - kv_target) // plan.expert_bytes
        profile = self.profile()
        slots = greedy_layers(profile, total_slots, self.top_k)
        if slots.sum() * plan.expert_bytes > pool - self.kv_floor_bytes:
            return None
        new = replace(plan, layer_slots=tuple(int(s) for s in slots), slots_per_layer=int(slots.min()),
                      kv_blocks=(pool - int(slots.sum()) * plan.expert_bytes) // plan.kv_block_bytes)
        self.new_steps, self.peak_kv_blocks = 0, 0
        if in_deadzone(plan, new):
            return None
        before = decode_step_s(profile, np.asarray(plan.slots_by_layer), self.link, plan.expert_bytes)
        after = decode_step_s(profile, slots, self.link, plan.expert_bytes)
        reason = (f"recent routing and KV use: predicted decode {1 / before:.1f} -> {1 / after:.1f} tok/s, "
                  f"KV {plan.kv_bytes / 2**30:.2f} -> {new.kv_bytes / 2**30:.2f} GiB")
        return Decision(new, reason)


def in_deadzone(old: MemoryPlan, new: MemoryPlan) -> bool:
    moved = np.abs(np.asarray(old.slots_by_layer) - np.asarray(new.slots_by_layer)).max()
    return moved <= 1 and abs(old.kv_bytes - new.kv_bytes) < old.expert_bytes


def predicted_curve(controller: OnlineController, plan: MemoryPlan, num_points: int = 24):
    """(share of the expert+KV pool given to expert slots, predicted decode tok/s) along the feasible range,
    from the controller's recent routing: the MV-WSA curve the app draws. None without enough routing."""
    if not controller.windows:
        return None
    profile = controller.profile()
    pool = plan.expert_device_bytes + plan.kv_bytes
    most = min((pool - controller.kv_floor_bytes) // plan.expert_bytes, profile.num_layers * profile.num_experts)
    wanted = set(np.linspace(profile.num_layers * profile.top_k, most, num_points).astype(int).tolist())
    points = []
    for slots in greedy_steps(profile, profile.top_k):
        total = int(slots.sum())
        if total in wanted:
            tok_s = 1.0 / decode_step_s(profile, slots, controller.link, plan.expert_bytes)
            points.append((total * plan.expert_bytes / pool, tok_s))
        if total >= most:
            break
    return tuple(points) or None
