"""MemoryPlan: how a device budget is spent (dense weights | expert slots | KV pool | workspace). Torch-free.

The budget is a hard limit: every byte the engine puts on the device is in the plan, and a budget below
the minimum is refused with the minimum named."""

from __future__ import annotations

from dataclasses import dataclass, replace

from engine.errors import BudgetError
from engine.expert_modes import ExpertMode
from engine.units import format_bytes

GATHER_LIMIT_BYTES = 320 * 1024**2  # the gathered experts of a small step (engine.experts.formats.kernel)
GATHER_MAX_ENTRIES = 64  # (token, expert) pairs of a small step

GiB = 1024**3
MiB = 1024**2
KV_FLOOR_BYTES = GiB // 2  # kappa_min's lower bound (docs/design.md)
DEFAULT_PAGED_SLOTS = 24  # the release's default cap, when neither a budget nor --expert-slots is given


@dataclass(frozen=True)
class ModelSizes:
    """What the planner needs to know about a model, in bytes."""

    dense_bytes: int
    expert_bytes: int  # one expert
    num_moe_layers: int
    num_experts: int
    top_k: int
    kv_bytes_per_token: int
    hidden_size: int
    vocab_size: int
    dtype_bytes: int
    num_layers: int = 1
    shared_expert_bytes: int = 0  # part of dense_bytes: shared experts run for every token, so they stay resident
    # MLA: one layer's keys and values per token as attention rebuilds them from the cache rows (0: the cache's own)
    expanded_kv_bytes_per_token: int = 0
    # linear-attention layers (qwen3_next, qwen3_5_moe): their conv + recurrent state of one sequence, any length
    state_bytes_per_seq: int = 0
    # the same, of a model whose verify steps chain its states through scratch rows (engine.model.state_chains), else 0
    verify_state_bytes_per_row: int = 0


@dataclass(frozen=True)
class MemoryPlan:
    mode: ExpertMode
    budget_bytes: int | None
    dense_bytes: int
    expert_bytes: int
    layer_slots: tuple[int, ...]  # device expert slots of each MoE layer (resident: all; static: 0; MV-WSA varies)
    num_moe_layers: int
    offloaded_layers: int  # static: MoE layers whose experts stream from the host every forward
    static_resident_bytes: int
    kv_blocks: int
    kv_block_bytes: int
    workspace_bytes: int
    shared_expert_bytes: int = 0  # part of dense_bytes (ModelSizes.shared_expert_bytes)
    # linear-attention state of max_num_seqs sequences and a verify step's scratch rows, beside the KV pool (not
    # re-split)
    state_bytes: int = 0
    verify_state_rows: int = 0  # of those, the verify steps' scratch rows (verify_state_rows)

    def __post_init__(self):
        object.__setattr__(self, "mode", ExpertMode(self.mode))

    @property
    def min_layer_slots(self) -> int:
        """The fewest slots of any MoE layer (every layer's count where the split is uniform)."""
        return min(self.layer_slots, default=0)

    @property
    def expert_device_bytes(self) -> int:
        if self.mode is ExpertMode.STATIC:
            return self.static_resident_bytes
        return sum(self.layer_slots) * self.expert_bytes

    @property
    def kv_bytes(self) -> int:
        return self.kv_blocks * self.kv_block_bytes

    @property
    def total_bytes(self) -> int:
        return self.dense_bytes + self.expert_device_bytes + self.kv_bytes + self.workspace_bytes + self.state_bytes

    @property
    def free_bytes(self) -> int | None:
        return None if self.budget_bytes is None else self.budget_bytes - self.total_bytes


def gathered_rows(expert_bytes: int) -> int:
    """Expert rows of the workspace's gathered-experts term: a small step's gathered blocks, or a large step's
    lookahead ring (engine.experts.pager.lookahead). Never both at once: a step is small or large."""
    return min(GATHER_MAX_ENTRIES, GATHER_LIMIT_BYTES // expert_bytes)


def small_step_drafts(draft_tokens: int, top_k: int, expert_bytes: int) -> int:
    """The most drafts (up to draft_tokens, at least 1) whose verify step of one sequence is still a small step: its
    (token, expert) entries within the gathered rows a small step holds (what
    engine.experts.routing.dispatch.is_small_step checks). One more row runs the experts the large step's way
    between the dense parts' graphs, a layer at a time: several small steps' time, where the draft-length rule's fit
    of step time against rows is linear (8 experts a token in Q4_K: 64 entries are 8 rows, 7 drafts)."""
    small_rows = gathered_rows(expert_bytes) // top_k
    return max(1, min(draft_tokens, small_rows - 1))


def verify_state_rows(sizes: ModelSizes, request: PlanRequest) -> int:
    """Scratch state rows of a model whose verify steps chain its linear-attention states (HybridCache), where the
    engine drafts (request.draft_tokens > 0): one per draft of the largest static step (its rows less one
    sequence's first), the drafts capped at a small step's."""
    if not request.draft_tokens or not sizes.verify_state_bytes_per_row:
        return 0
    return max(request.max_num_seqs - 1, small_step_drafts(request.draft_tokens, sizes.top_k, sizes.expert_bytes))


def workspace_bytes(sizes: ModelSizes, max_batched_tokens: int, max_num_seqs: int) -> int:
    """Activations of the largest step: hidden states, attention/MLP temporaries, the [T, K, D] expert buffer,
    the gathered experts of a small step (or a large step's lookahead ring, at most as many bytes: gathered_rows),
    and fp32 logits with the sampler's copies. Generous on purpose: it is measured against the budget."""
    per_token = (sizes.top_k + 24) * sizes.hidden_size * sizes.dtype_bytes
    logits = 4 * max_num_seqs * sizes.vocab_size * 4
    context = max_batched_tokens // max_num_seqs
    layer_kv = max(sizes.kv_bytes_per_token // sizes.num_layers, sizes.expanded_kv_bytes_per_token)
    decode_gather = 4 * max_num_seqs * context * layer_kv  # padded K/V of a layer
    gathered = min(GATHER_LIMIT_BYTES, GATHER_MAX_ENTRIES * sizes.expert_bytes)
    return 64 * MiB + max_batched_tokens * per_token + logits + decode_gather + gathered


def kv_floor_bytes(sizes: ModelSizes, concurrency: int, max_model_len: int) -> int:
    """kappa_min = max(0.5 GiB, concurrency x max context x KV bytes per token)."""
    return max(KV_FLOOR_BYTES, concurrency * max_model_len * sizes.kv_bytes_per_token)


@dataclass(frozen=True)
class PlanRequest:
    mode: ExpertMode
    budget_bytes: int | None
    block_size: int
    max_model_len: int
    max_num_seqs: int
    max_batched_tokens: int
    expert_slots: int | None = None
    kv_blocks: int | None = None
    draft_tokens: int = 0  # --draft-tokens where the engine drafts, else 0 (the verify steps' scratch state rows)

    def __post_init__(self):
        object.__setattr__(self, "mode", ExpertMode.parse(self.mode))


def gib(num_bytes: int) -> str:
    return format_bytes(num_bytes)


def plan_memory(sizes: ModelSizes, request: PlanRequest) -> MemoryPlan:
    """Split the budget; raises BudgetError naming the minimum when it cannot fit."""
    block_bytes = request.block_size * sizes.kv_bytes_per_token
    workspace = workspace_bytes(sizes, request.max_batched_tokens, request.max_num_seqs)
    kv_floor = kv_floor_bytes(sizes, request.max_num_seqs, request.max_model_len)
    layer_bytes = sizes.num_experts * sizes.expert_bytes
    state = state_bytes(sizes, request)
    base = dict(mode=request.mode, budget_bytes=request.budget_bytes, dense_bytes=sizes.dense_bytes,
                expert_bytes=sizes.expert_bytes, num_moe_layers=sizes.num_moe_layers, kv_block_bytes=block_bytes,
                workspace_bytes=workspace, offloaded_layers=0, static_resident_bytes=0,
                shared_expert_bytes=sizes.shared_expert_bytes, state_bytes=state,
                verify_state_rows=verify_state_rows(sizes, request))
    fixed = sizes.dense_bytes + workspace + state
    if request.mode is ExpertMode.RESIDENT:
        experts = sizes.num_moe_layers * layer_bytes
        kv = kv_bytes_within(request, fixed + experts, kv_floor, "all experts resident", paged_hint=True)
        return with_kv(MemoryPlan(**base, layer_slots=(sizes.num_experts,) * sizes.num_moe_layers,
                                     kv_blocks=kv // block_bytes), request)
    if request.mode is ExpertMode.STATIC:
        return plan_static(sizes, request, base, fixed, kv_floor, layer_bytes)
    slots = paged_slots(sizes, request, fixed, kv_floor)
    kv = kv_bytes_within(request, fixed + slots * sizes.num_moe_layers * sizes.expert_bytes, kv_floor,
                         f"{slots} expert slots per layer")
    return with_kv(MemoryPlan(**base, layer_slots=(slots,) * sizes.num_moe_layers, kv_blocks=kv // block_bytes), request)


def state_bytes(sizes: ModelSizes, request: PlanRequest) -> int:
    """The linear-attention state of every sequence that can run at once, and the scratch states of a static verify
    step where the model chains them (HybridCache; 0 for models without such layers)."""
    return (sizes.state_bytes_per_seq * request.max_num_seqs
            + sizes.verify_state_bytes_per_row * verify_state_rows(sizes, request))


def minimum_budget(sizes: ModelSizes, request: PlanRequest) -> int:
    """Dense weights + top_k slots in every MoE layer + kappa_min + workspace (+ linear-attention state)."""
    slots = sizes.top_k * sizes.num_moe_layers * sizes.expert_bytes
    kv_floor = kv_floor_bytes(sizes, request.max_num_seqs, request.max_model_len)
    workspace = workspace_bytes(sizes, request.max_batched_tokens, request.max_num_seqs)
    return sizes.dense_bytes + slots + kv_floor + workspace + state_bytes(sizes, request)


def paged_slots(sizes: ModelSizes, request: PlanRequest, fixed: int, kv_floor: int) -> int:
    if request.expert_slots is not None:
        if request.expert_slots > sizes.num_experts:
            raise BudgetError(f"{request.expert_slots} expert slots per layer is more than the model's "
                              f"{sizes.num_experts} experts per layer; give at most {sizes.num_experts}")
        return request.expert_slots
    if request.budget_bytes is None:
        return min(DEFAULT_PAGED_SLOTS, sizes.num_experts)
    per_slot_row = sizes.num_moe_layers * sizes.expert_bytes
    slots = min(sizes.num_experts, (request.budget_bytes - fixed - kv_floor) // per_slot_row)
    if slots < sizes.top_k:
        raise BudgetError(
            f"a budget of {gib(request.budget_bytes)} is too small for this model: the minimum is "
            f"{gib(minimum_budget(sizes, request))} (dense weights {gib(sizes.dense_bytes)} + {sizes.top_k} expert "
            f"slots per layer + {gib(kv_floor)} KV + workspace)"
        )
    return int(slots)


def kv_bytes_within(request: PlanRequest, used: int, kv_floor: int, what: str, paged_hint: bool = False) -> int:
    """KV bytes: an explicit block count, else kappa_min without a budget, else all the budget leaves."""
    if request.budget_bytes is None:
        return kv_floor
    left = request.budget_bytes - used
    if left < kv_floor:
        hint = "; try --experts paged" if paged_hint else ""
        raise BudgetError(
            f"a budget of {gib(request.budget_bytes)} cannot hold {what} plus the KV cache floor of "
            f"{gib(kv_floor)}: it needs at least {gib(used + kv_floor)}{hint}"
        )
    return left


def plan_static(sizes: ModelSizes, request: PlanRequest, base: dict, fixed: int, kv_floor: int, layer_bytes: int):
    """Keep as many leading MoE layers' experts on the host as needed to fit; one staging layer streams them."""
    num_layers = sizes.num_moe_layers
    if request.budget_bytes is None:
        resident = 0
    else:
        room = request.budget_bytes - fixed - kv_floor
        resident = num_layers if room >= num_layers * layer_bytes else max(0, (room - layer_bytes) // layer_bytes)
        if room < layer_bytes:
            raise BudgetError(
                f"a budget of {gib(request.budget_bytes)} is too small for static offload: it needs at least "
                f"{gib(fixed + kv_floor + layer_bytes)} (dense weights + one streamed layer + KV floor + workspace)"
            )
    offloaded = num_layers - int(resident)
    device_experts = int(resident) * layer_bytes + (layer_bytes if offloaded else 0)
    kv = kv_bytes_within(request, fixed + device_experts, kv_floor, f"{offloaded} offloaded layers")
    plan = MemoryPlan(**{**base, "offloaded_layers": offloaded, "static_resident_bytes": device_experts},
                      layer_slots=(0,) * num_layers, kv_blocks=kv // base["kv_block_bytes"])
    return with_kv(plan, request)


def with_kv(plan: MemoryPlan, request: PlanRequest) -> MemoryPlan:
    """Apply an explicit KV block count (tests, experiments) and check it still fits the budget."""
    if request.kv_blocks is None:
        return plan
    plan = replace(plan, kv_blocks=request.kv_blocks)
    if plan.free_bytes is not None and plan.free_bytes < 0:
        raise BudgetError(f"{request.kv_blocks} KV blocks do not fit a budget of {gib(request.budget_bytes)}")
    return plan
