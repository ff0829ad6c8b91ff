"""Sentences about memory plans and the controller's decisions (PlanEvents), for the panel and its log."""

from __future__ import annotations

import time

from app.engine_api import ExpertMode

REMOTE_TEXT = "memory managed by the remote server"
BUDGET_REASON = "budget changed"  # a PlanEvent's reason when the budget (the slider) changed, not the controller


def is_remote(plan) -> bool:
    """A remote engine's plan: no local budget, expert slots or KV cache (all its sizes are 0)."""
    return plan.mode == ExpertMode.REMOTE


def has_pager(plan) -> bool:
    """Wisp's own engine with an expert pager (paged mode): the budget, hit rate and host->device rate apply.
    llama.cpp places a model itself and a remote server has no local memory."""
    return plan.mode not in (ExpertMode.REMOTE, ExpertMode.LLAMA_CPP)


def controller_status(plan, curve, share: float | None) -> str:
    """What the online controller is doing between decisions, from its predicted curve: how far the current
    split is from the best one it sees (a re-split must win back its pause, so small gaps are kept)."""
    if plan.mode != ExpertMode.PAGED or plan.budget_bytes is None:
        return "The online controller re-splits paged models with a budget."
    if not curve or share is None:
        return "Watching: it decides at drained barriers once it has seen enough routing."
    from app.memory.wsa_curve import value_at

    best_share, best = max(curve, key=lambda point: point[1])
    now = value_at(curve, share)
    if best <= 0 or now >= best * 0.98:
        return f"Keeping this split: it is the best predicted ({now:.1f} tok/s at {share:.0%} experts)."
    return (f"Watching: {now:.1f} tok/s predicted now, {best:.1f} at {best_share:.0%} experts; it re-splits when "
            f"the gain pays for the pause.")


def slot_counts(plan) -> tuple[int, ...]:
    """Expert slots of each MoE layer (MV-WSA may give layers different counts)."""
    return tuple(plan.layer_slots)


def per_layer(counts: tuple[int, ...]) -> str:
    low, high = min(counts, default=0), max(counts, default=0)
    return f"{low} per layer" if low == high else f"{low}–{high} per layer"


def slots_text(plan) -> str:
    counts = slot_counts(plan)
    if len(set(counts)) <= 1:
        return f"{counts[0] if counts else 0} expert slots × {plan.num_moe_layers} MoE layers"
    return f"{sum(counts)} expert slots over {plan.num_moe_layers} MoE layers ({min(counts)}–{max(counts)} per layer)"


def plan_summary(plan, format_bytes) -> str:
    if is_remote(plan):
        return REMOTE_TEXT
    if plan.mode == ExpertMode.PAGED:
        experts = slots_text(plan)
    elif plan.mode == ExpertMode.STATIC:
        experts = f"{plan.offloaded_layers} of {plan.num_moe_layers} MoE layers streamed from the host"
    else:
        experts = "all experts resident"
    return f"{experts} · KV {format_bytes(plan.kv_bytes)} ({plan.kv_blocks:,} blocks){shared_text(plan, format_bytes)}"


def shared_text(plan, format_bytes) -> str:
    """Shared experts run for every token: the planner counts them with the dense weights, never as slots."""
    if not plan.shared_expert_bytes:
        return ""
    return f" · shared experts {format_bytes(plan.shared_expert_bytes)}, resident with the dense weights"


def _budget(plan, format_bytes) -> str:
    return "no budget" if plan.budget_bytes is None else format_bytes(plan.budget_bytes)


def plan_changes(old, new, format_bytes) -> list[str]:
    changes = []
    if old.budget_bytes != new.budget_bytes:
        changes.append(f"budget {_budget(old, format_bytes)} → {_budget(new, format_bytes)}")
    if slot_counts(old) != slot_counts(new):
        counts = slot_counts(new)
        changes.append(f"expert slots {sum(slot_counts(old))} → {sum(counts)} in all ({per_layer(counts)})")
    if old.kv_bytes != new.kv_bytes:
        changes.append(f"KV {format_bytes(old.kv_bytes)} → {format_bytes(new.kv_bytes)}")
    return changes


def describe_plan_event(event, format_bytes) -> str:
    when = time.strftime("%H:%M:%S", time.localtime(event.time))
    if event.error:
        return f"{when} {event.reason}: refused. {event.error}"
    changes = plan_changes(event.old, event.new, format_bytes) or ["no change"]
    paused = f" (paused {event.stall_s:.2f} s)" if event.stall_s >= 0.005 else ""
    return f"{when} {event.reason} — " + "; ".join(changes) + paused
