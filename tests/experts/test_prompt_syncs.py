"""A prompt step's host syncs, counted on the CPU: every call that reads a tensor back to the host (.cpu(), .item(),
.tolist(), a tensor's truth value or int, nonzero, unique, boolean masks) or copies one to a device without
non_blocking (a pageable copy waits for every kernel queued before it). On CUDA each one stalls the host until
the GPU drains, once per layer where it sits in the layer's path: a prompt of Qwen3's 48 layers pays it 48 times.
The counts are a regression guard: a new sync in the large-step path makes these tests fail."""

from __future__ import annotations

import collections

import pytest
import torch
from torch.overrides import TorchFunctionMode

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.experts.routing import dispatch
from engine.model.loader import read_args

READS = {"cpu", "item", "tolist", "__bool__", "__int__", "__float__", "__index__", "nonzero", "argwhere", "unique",
         "unique_consecutive", "masked_select", "any", "all"}
PROMPT = "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n" * 2
# Per MoE layer of a large prompt step: the routed ids read once (the host plans the grouped dispatch from them);
# the plan's index goes up from pinned memory (engine.experts.routing.dispatch.to_device), as do the step's inputs.
SYNCS_PER_LAYER = 1
SYNCS_PER_STEP = 0  # besides the layers


class SyncCounter(TorchFunctionMode):
    """Counts host-syncing tensor calls by name."""

    def __init__(self):
        super().__init__()
        self.calls = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in READS or name == "to" and is_blocking_transfer(args, kwargs):
            self.calls[name] += 1
        elif name == "__getitem__" and any(is_mask(i) for i in indices(args[1])):
            self.calls["boolean mask"] += 1
        return func(*args, **kwargs)


def is_blocking_transfer(args, kwargs) -> bool:
    """tensor.to(device, ...) without non_blocking: a pageable copy on CUDA (a no-op on the CPU, counted alike)."""
    device = kwargs.get("device", args[1] if len(args) > 1 else None)
    return isinstance(device, (torch.device, str)) and not kwargs.get("non_blocking", False)


def indices(index):
    return index if isinstance(index, tuple) else (index,)


def is_mask(index) -> bool:
    return isinstance(index, torch.Tensor) and index.dtype == torch.bool


def prompt_step_syncs(folder, **options) -> collections.Counter:
    """Host syncs of the prompt step (the runner's forward, its logits included) of one request."""
    with Engine(EngineOptions(model=str(folder), device="cpu", **options)) as engine:
        runner, counted = engine._core.runner, []
        run = runner.run

        def counting_run(seqs, is_prefill):
            if not is_prefill:
                return run(seqs, is_prefill)
            with SyncCounter() as counter:
                logits = run(seqs, is_prefill)
            counted.append(counter.calls)
            return logits

        runner.run = counting_run
        result = engine.generate(GenerateRequest(prompt=PROMPT, sampling=SamplingParams(max_tokens=2)))
    assert result.error is None and len(counted) == 1
    return counted[0]


@pytest.fixture
def large_steps(monkeypatch, tiny_model_dir):
    """The prompt takes the large-step (grouped dispatch) path, as a real prompt does."""
    monkeypatch.setattr(dispatch, "GATHER_LIMIT_BYTES", 3 * read_args(tiny_model_dir("olmoe")).expert_numel * 4)


@pytest.mark.parametrize("model", ["qwen3_moe", "gpt_oss", "deepseek_v3"])
@pytest.mark.parametrize("experts", ["resident", "paged"])
def test_prompt_step_syncs_once_per_moe_layer(tiny_model_dir, large_steps, model, experts):
    folder = tiny_model_dir(model)
    args = read_args(folder)
    options = dict(expert_slots=args.num_experts_per_tok) if experts == "paged" else {}
    calls = prompt_step_syncs(folder, experts=experts, **options)
    moe_layers = sum(args.moe_layers)
    assert sum(calls.values()) <= SYNCS_PER_LAYER * moe_layers + SYNCS_PER_STEP, calls


def test_the_counter_sees_a_sync(tiny_model_dir, large_steps, monkeypatch):
    """The guard can fail: one more read per layer-step is counted."""
    from engine.experts.providers.resident import ResidentExperts

    forward = ResidentExperts.forward
    monkeypatch.setattr(ResidentExperts, "forward", lambda self, layer, x, ids, w: (ids.max().item(),
                                                                                     forward(self, layer, x, ids, w))[1])
    folder = tiny_model_dir("qwen3_moe")
    calls = prompt_step_syncs(folder, experts="resident")
    assert calls["item"] == sum(read_args(folder).moe_layers)


def test_a_grouped_resident_prompt_step_reads_nothing_back(tiny_model_dir, large_steps, monkeypatch):
    """Where the grouped kernels run (forced here: Triton's interpreter on the CPU), a resident prompt step plans
    every layer-step on the device (dispatch.plan_on_device): no host sync in the whole forward."""
    from engine.quant import expert_format, grouped_gemm

    monkeypatch.setattr(grouped_gemm, "runs_grouped", lambda *args: True)
    monkeypatch.setattr(expert_format, "runs_grouped", lambda *args: True)
    calls = prompt_step_syncs(tiny_model_dir("qwen3_moe"), experts="resident")
    assert sum(calls.values()) == 0, calls
