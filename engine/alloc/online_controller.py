"""The online MV-WSA controller (torch-free): watches recent routing (per-layer sliding windows of each
step's unique experts) and KV use, and at drained barriers proposes a new split of the expert/KV pool.

KV target = max(floor, peak KV in use since the last decision x (1 + headroom), what waiting requests
need); experts get the rest, shared between layers by their recent miss curves. A deadzone (no layer moves
by more than one slot and KV by less than a slot's bytes) prevents oscillation.

Beyond the paper, KV follows demand both ways: the engine's floor is what one full-length request needs
(not concurrency x max context, which the offline split must hold at all times), and when requests wait
that the KV pool cannot hold while nothing runs (an admission barrier), the controller grows KV for them
at once, without waiting for evidence and past the deadzone.

A re-split stalls the engine (the pool is rebuilt, the kept experts are copied back, decode graphs are
captured again), so a move that only speeds decode up (KV given to the experts, slots moved between
layers) is made once it pays: its predicted saving per decode step, times the decode steps run since the
last re-split (the ski-rental rule: never more than twice the cost of the best choice in hindsight) plus
the decode steps the requests now waiting will run (known at an admission barrier: a chat that follows a
burst gets its slots before it starts, not after it has paid for the burst's split), must exceed the stall.
Growing KV for observed use is not weighed (the cost model prices decode, not waiting); the headroom on
top of the peak is added only when a sequence was preempted since the last decision (a burst that fitted
keeps what it used, and a bigger one is grown for at its admission barrier)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

import numpy as np

from engine.alloc.cost_model import LinkCost, RoutingProfile, decode_step_s
from engine.alloc.memory_plan import MemoryPlan
from engine.alloc.miss_curve import hit_rate_curve, stack_depths_many
from engine.alloc.mvwsa import greedy_layers, greedy_steps
from engine.units import format_bytes

# Seconds one re-split stalls the engine beyond copying the kept experts back: applying the plan, the next decode
# step's graph capture and the controller's own work, at the Qwen3-30B-A3B shape on an H200
# (bench/results/2026-11-29-online-vs-static/NOTES.md has the measured parts).
RESIZE_S = 0.75


@dataclass(frozen=True)
class Decision:
    plan: MemoryPlan
    reason: str


class OnlineController:
    def __init__(self, num_experts: int, top_k: int, kv_floor_bytes: int, link: LinkCost,
                 window_steps: int = 256, headroom: float = 0.25, min_steps: int = 32, resize_s: float = RESIZE_S):
        self.num_experts, self.top_k = num_experts, top_k
        self.kv_floor_bytes, self.link = kv_floor_bytes, link
        self.headroom, self.min_steps, self.resize_s = headroom, min_steps, resize_s
        self.windows: dict[int, deque] = {}
        self.window_steps = window_steps
        self.new_steps = 0
        self.decode_since_change = 0  # decode layer-steps since the last re-split: what a move must pay back over
        self.peak_kv_blocks = 0
        self.preemptions = self.preemptions_at_decision = 0  # the scheduler's running count, and at the last decision
        self.observed = 0  # layer-steps seen so far: the cached profile is current while this is unchanged
        self._profile: tuple[int, RoutingProfile] | None = None

    def observe_routing(self, layer: int, needed: list[int], is_decode: bool) -> None:
        window = self.windows.setdefault(layer, deque(maxlen=self.window_steps))
        window.append((np.asarray(needed, dtype=np.int64), is_decode))
        self.new_steps += 1
        self.observed += 1
        self.decode_since_change += is_decode

    def observe_kv(self, used_blocks: int, preemptions: int = 0) -> None:
        """KV blocks in use after a step, and the scheduler's count of preemptions so far."""
        self.peak_kv_blocks = max(self.peak_kv_blocks, used_blocks)
        self.preemptions = max(self.preemptions, preemptions)

    def profile(self) -> RoutingProfile:
        """Miss curves of the decode steps in the windows (a prefill step touches most experts at once and
        says nothing about decode reuse); of every step where a layer has seen no decode yet. Computed once per
        new evidence (each request passes two barriers and the app's curve): all layers in one pass, 24 ms for
        48 layers x 256 decode steps on the development machine, 86 ms layer by layer."""
        if self._profile is not None and self._profile[0] == self.observed:
            return self._profile[1]  # nothing new since (an admission barrier right after a drained one, the curve)
        layers = sorted(self.windows)
        depths = stack_depths_many([decode_steps(self.windows[l]) for l in layers], self.num_experts)
        curves = [hit_rate_curve(d, self.num_experts) for d in depths]
        accesses = [np.mean([e.size for e, decode in self.windows[l] if decode] or [self.top_k]) for l in layers]
        profile = RoutingProfile(np.stack(curves), np.asarray(accesses), 1.0, self.num_experts, self.top_k)
        self._profile = (self.observed, profile)
        return profile

    def decide(self, plan: MemoryPlan, waiting_blocks: int = 0, upcoming_steps: int = 0) -> Decision | None:
        """A better plan for the recent workload, or None (too little new evidence, inside the deadzone, or not
        worth its stall). At an admission barrier: waiting_blocks, the KV blocks the waiting requests need (more
        than the pool holds makes it urgent), and upcoming_steps, the decode steps they will run."""
        urgent = waiting_blocks > plan.kv_blocks
        enough = self.windows and (self.new_steps >= self.min_steps * len(self.windows) or upcoming_steps > 0)
        if not plan.mode.can_resplit or plan.budget_bytes is None or not (enough or urgent):
            return None
        pool = plan.expert_device_bytes + plan.kv_bytes
        pressed = self.preemptions > self.preemptions_at_decision  # KV ran out: keep headroom above the peak
        used = int(self.peak_kv_blocks * (1 + self.headroom)) if pressed else self.peak_kv_blocks
        kv_target = max(self.kv_floor_bytes, used * plan.kv_block_bytes, waiting_blocks * plan.kv_block_bytes)
        most_slots = (pool - self.kv_floor_bytes) // plan.expert_bytes
        total_slots = max(min((pool - kv_target) // plan.expert_bytes, most_slots), plan.num_moe_layers * self.top_k)
        profile = self.profile() if self.windows else None
        slots = (greedy_layers(profile, total_slots, self.top_k) if profile is not None
                 else scaled_slots(plan.layer_slots, total_slots, self.top_k))
        if slots.sum() * plan.expert_bytes > pool - self.kv_floor_bytes:
            return None
        new = replace(plan, layer_slots=tuple(int(s) for s in slots),
                      kv_blocks=(pool - int(slots.sum()) * plan.expert_bytes) // plan.kv_block_bytes)
        self.new_steps, self.peak_kv_blocks = 0, 0
        self.preemptions_at_decision = self.preemptions
        if new.kv_blocks <= plan.kv_blocks and urgent:
            return None  # the experts cannot give more: the waiting requests are admitted as KV frees up
        if in_deadzone(plan, new) and not urgent:
            return None
        why = f"waiting requests need {waiting_blocks} KV blocks" if urgent else "recent routing and KV use"
        reason = f"{why}: KV {format_bytes(plan.kv_bytes)} -> {format_bytes(new.kv_bytes)}"
        if profile is not None:
            before = decode_step_s(profile, np.asarray(plan.layer_slots), self.link, plan.expert_bytes)
            after = decode_step_s(profile, slots, self.link, plan.expert_bytes)
            reason += f", predicted decode {1 / before:.1f} -> {1 / after:.1f} tok/s"
            stretch = self.decode_since_change / len(self.windows)  # decode steps run under the current split
            if not urgent and new.kv_blocks <= plan.kv_blocks:
                if (before - after) * (stretch + upcoming_steps) < self.stall_s(plan, new):
                    return None  # neither what staying has cost nor the known work ahead pays for the stall
                if upcoming_steps:
                    reason += f" over the {upcoming_steps} decode steps the waiting requests will run"
        self.decode_since_change = 0
        return Decision(new, reason)

    def stall_s(self, old: MemoryPlan, new: MemoryPlan) -> float:
        """Predicted stall of re-splitting old -> new: the fixed cost plus copying back the experts both keep."""
        kept = np.minimum(np.asarray(old.layer_slots), np.asarray(new.layer_slots)).sum()
        return self.resize_s + int(kept) * old.expert_bytes / self.link.h2d_bytes_per_s


def decode_steps(window) -> list[np.ndarray]:
    steps = [experts for experts, is_decode in window if is_decode]
    return steps or [experts for experts, _ in window]


def scaled_slots(current, total_slots: int, min_slots: int) -> np.ndarray:
    """Without routing evidence: every layer keeps its share of the current slots (at least min_slots)."""
    current = np.asarray(current, dtype=np.int64)
    return np.maximum(current * total_slots // max(int(current.sum()), 1), min_slots)


def in_deadzone(old: MemoryPlan, new: MemoryPlan) -> bool:
    moved = np.abs(np.asarray(old.layer_slots) - np.asarray(new.layer_slots)).max()
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
