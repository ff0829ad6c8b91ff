"""The fused Gated DeltaNet decode step (engine.model.deltanet_step_kernels) under the Triton interpreter on the CPU,
against the unfused torch path: a layer's decode output and its cache rows after the step, in fp32 and bf16, for one
sequence and for three at distinct slots; a row's bits alone equal its bits in a batch; the cache rows of the slots
not stepped untouched; a verify step's kept states; a static verify step's chains (a sequence's rows in order, the
states after each in scratch rows); the engine's greedy tokens; the ops of one decode step; and the
kernels compiled for sm_90 (what the interpreter does not run). tests/gpu/test_deltanet_step_gpu.py runs them on
CUDA."""

from __future__ import annotations

import dataclasses
import os
import sys

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from engine.model import deltanet_step_kernels
from engine.model.attention import SeqSpan
from engine.model.config_file import read_args
from engine.model.hybrid_layers import GatedDeltaNet
from engine.model.state_cache import HybridCache

pytest.importorskip("triton")
NUM_SEQS = 6
# max |fused - torch| / max |torch| of a tensor of the dtype (the reductions over Dk and Dv run in another order: a few
# fp32 ulps, which may flip one bf16 rounding)
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 8e-3}


def round_to_nearest_even(monkeypatch):
    """The interpreter converts fp32 to bf16 by truncating; CUDA's conversion (and torch's) rounds to nearest even,
    so the interpreter converts as they do here."""
    import numpy as np
    import triton.language as tl
    from triton.runtime.interpreter import InterpreterBuilder, TensorHandle

    cast = InterpreterBuilder.cast_impl

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            rounded = torch.from_numpy(np.ascontiguousarray(src.data)).to(torch.bfloat16).view(torch.int16)
            return TensorHandle(rounded.numpy().view(np.uint16), tl.bfloat16)
        return cast(self, src, dst_type)

    monkeypatch.setattr(InterpreterBuilder, "cast_impl", cast_impl)


@pytest.fixture
def interpreted(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    round_to_nearest_even(monkeypatch)
    monkeypatch.delitem(sys.modules, "engine.model.deltanet_step_triton", raising=False)  # its kernels interpreted
    deltanet_step_kernels._built.clear()
    yield
    deltanet_step_kernels._built.clear()


def fused(monkeypatch, on: bool):
    monkeypatch.setattr(deltanet_step_kernels, "applies", lambda x: on)


def layer_and_cache(folder, dtype, tiled=False, stores_decay=False, seed=0, device="cpu", **heads):
    """A Gated DeltaNet layer of the checkpoint's args (`heads`: LinearAttentionArgs fields to change) with random
    weights, and a state cache of NUM_SEQS random states."""
    args = read_args(folder)
    args = dataclasses.replace(args, linear=dataclasses.replace(args.linear, tiled_value_heads=tiled,
                                                                 llama_cpp_values=stores_decay, **heads))
    torch.manual_seed(seed)
    layer = GatedDeltaNet(args, state_layer=1)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn_like(p) * (0.3 if p.ndim > 1 else 1.0))
        if stores_decay:
            layer.A.copy_(-layer.A.abs())
        layer.norm.weight.add_(1.0)
    layer = layer.to(device=device, dtype=dtype)
    cache = HybridCache(args, num_slots=16, num_seqs=NUM_SEQS, dtype=dtype, device=device)
    for states in cache.states:
        for state in states:
            state.copy_(torch.randn_like(state, dtype=torch.float32).to(state.dtype) * 0.5)
    return layer, cache


def copy_cache(cache: HybridCache) -> list[tuple[torch.Tensor, ...]]:
    return [tuple(s.clone() for s in states) for states in cache.states]


def twin(cache: HybridCache) -> HybridCache:
    """The cache with a copy of its states (the KV pools shared)."""
    other = HybridCache.__new__(HybridCache)
    other.__dict__.update(cache.__dict__, states=copy_cache(cache), verified_states={})
    return other


def decode(monkeypatch, layer, cache, x, slots, on: bool):
    fused(monkeypatch, on)
    with torch.no_grad():
        inputs, z = layer.mix_inputs(x)
        return layer.output(layer.decode(torch.tensor(slots), inputs, cache), z)


def relative_error(ours, reference) -> float:
    return ((ours.float() - reference.float()).abs().max() / reference.float().abs().max()).item()


def assert_close(ours, reference):
    assert ours.dtype == reference.dtype and ours.shape == reference.shape
    assert relative_error(ours, reference) < TOLERANCE[ours.dtype], relative_error(ours, reference)


CASES = [(torch.float32, False, False), (torch.bfloat16, False, False), (torch.float32, True, True),
         (torch.bfloat16, True, True)]
CASE_IDS = ["fp32", "bf16", "fp32-tiled-decay", "bf16-tiled-decay"]


@pytest.mark.parametrize("dtype, tiled, stores_decay", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("slots", [[3], [4, 0, 2]], ids=["B1", "B3"])
def test_fused_steps_match_the_torch_path(interpreted, monkeypatch, tiny_model_dir, dtype, tiled, stores_decay,
                                          slots):
    layer, cache = layer_and_cache(tiny_model_dir("qwen3_5_moe"), dtype, tiled, stores_decay)
    reference = twin(cache)
    before = copy_cache(cache)
    generator = torch.Generator().manual_seed(1)
    for step in range(3):
        x = torch.randn(len(slots), layer.out_proj.out_features, generator=generator).to(dtype)
        ours = decode(monkeypatch, layer, cache, x, slots, on=True)
        ref = decode(monkeypatch, layer, reference, x, slots, on=False)
        assert_close(ours, ref)
        layer_states, ref_states = cache.states[layer.state_layer], reference.states[layer.state_layer]
        assert torch.equal(layer_states[0], ref_states[0])  # the conv history: the stored rows, shifted
        assert_close(layer_states[1], ref_states[1])
    untouched = [s for s in range(NUM_SEQS) if s not in slots]
    for layer_index, states in enumerate(cache.states):
        for state, old in zip(states, before[layer_index]):
            if layer_index != layer.state_layer:
                assert torch.equal(state, old)
            else:
                assert torch.equal(state[untouched], old[untouched])


def test_fused_conv_sums_the_taps_as_causal_conv_does(interpreted, monkeypatch, tiny_model_dir):
    """fp32: the taps in causal_conv's order with no FP contraction; silu's exp is numpy's under the interpreter
    (libdevice's on CUDA, as torch's), so the outputs are within an ulp or two and the shifted history exact."""
    from engine.model.gated_deltanet import causal_conv

    layer, cache = layer_and_cache(tiny_model_dir("qwen3_5_moe"), torch.float32)
    history = cache.states[layer.state_layer][0]
    x = torch.randn(2, history.shape[-1])
    slots = torch.tensor([5, 1])
    ref, ref_history = causal_conv(x[:, None], history[slots], layer.conv1d.weight[:, 0].detach())
    ours = deltanet_step_kernels.conv_step(x, history, layer.conv1d.weight[:, 0].detach(), slots)
    torch.testing.assert_close(ours, ref[:, 0], rtol=3e-7, atol=1e-30)
    assert torch.equal(history[slots], ref_history)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_rows_bits_alone_equal_its_bits_in_a_batch(interpreted, monkeypatch, tiny_model_dir, dtype):
    """The kernels' part of the step (from the projections' rows to the normed rows out_proj reads): the projections
    are computed once, for the batch, as the CPU's matmul may round a row differently in another batch size."""
    layer, cache = layer_and_cache(tiny_model_dir("qwen3_5_moe"), dtype)
    alone_cache = twin(cache)
    fused(monkeypatch, True)
    x = torch.randn(3, layer.out_proj.out_features, generator=torch.Generator().manual_seed(3)).to(dtype)
    with torch.no_grad():
        inputs, z = layer.mix_inputs(x)
        rows = []
        for target, index, slots in ((cache, slice(0, 3), [4, 0, 2]), (alone_cache, slice(1, 2), [0])):
            out = layer.decode(torch.tensor(slots), tuple(t[index] for t in inputs), target)
            normed = deltanet_step_kernels.gated_norm(out.reshape(-1, layer.head_v_dim),
                                                      z[index].reshape(-1, layer.head_v_dim), layer.norm.weight,
                                                      layer.norm.eps)
            rows.append((out, normed))
    (together, together_normed), (alone, alone_normed) = rows
    assert torch.equal(alone, together[1:2]) and torch.equal(alone_normed, together_normed.view(3, -1)[1:2].view(-1,
                                                                                                   layer.head_v_dim))
    for state, alone_state in zip(cache.states[layer.state_layer], alone_cache.states[layer.state_layer]):
        assert torch.equal(alone_state[0], state[0])


def test_a_verify_step_keeps_the_states_of_the_torch_path(interpreted, monkeypatch, tiny_model_dir):
    """StateMixer.verify: three positions of one sequence, one at a time, each position's states kept."""
    layer, cache = layer_and_cache(tiny_model_dir("qwen3_5_moe"), torch.float32)
    reference = twin(cache)
    x = torch.randn(3, layer.out_proj.out_features, generator=torch.Generator().manual_seed(4))
    span = SeqSpan(q_start=0, q_len=3, kv_slots=torch.arange(10), state_slot=2, is_verify=True)
    outs = []
    for on, target in ((True, cache), (False, reference)):
        fused(monkeypatch, on)
        with torch.no_grad():
            inputs, z = layer.mix_inputs(x)
            out = torch.empty(3, *layer.out_tail)
            layer.verify(span, inputs, out, target)
            outs.append(layer.output(out, z))
    assert_close(outs[0], outs[1])
    ours, ref = cache.verified_states[(1, 2)], reference.verified_states[(1, 2)]
    assert len(ours) == len(ref) == 3
    for kept, ref_kept in zip(ours, ref):
        assert torch.equal(kept[0], ref_kept[0])
        assert_close(kept[1], ref_kept[1])


# aten ops that launch no device kernel (views, allocations, metadata)
NO_KERNEL = {"t", "view", "_unsafe_view", "unsqueeze", "select", "slice", "expand", "split_with_sizes", "detach",
             "lift_fresh", "empty", "empty_like", "new_empty", "empty_strided", "promote_types"}


class CountOps(TorchDispatchMode):
    """The aten ops a step dispatches, each Triton launch of deltanet_step_kernels as one "triton:<kernel>" (what the
    interpreter runs inside a launch is not counted)."""

    def __init__(self):
        super().__init__()
        self.ops: list[str] = []
        self.paused = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self.paused:
            self.ops.append(str(func.overloadpacket.__name__))
        return func(*args, **(kwargs or {}))

    def launches(self, name: str, kernel):
        counter = self

        class Launch:
            def __getitem__(self, grid):
                def run(*args, **kwargs):
                    counter.ops.append(f"triton:{name}")
                    counter.paused = True
                    try:
                        return kernel[grid](*args, **kwargs)
                    finally:
                        counter.paused = False

                return run

        return Launch()


def step_ops(monkeypatch, layer, cache, x, on: bool) -> list[str]:
    fused(monkeypatch, on)
    counter = CountOps()
    kernels = deltanet_step_kernels._kernels()
    with monkeypatch.context() as patch:
        for name in ("conv", "delta", "norm"):
            patch.setitem(kernels, name, counter.launches(name, kernels[name]))
        with torch.no_grad(), counter:
            inputs, z = layer.mix_inputs(x)
            layer.output(layer.decode(torch.tensor([4, 0, 2]), inputs, cache), z)
    return counter.ops


def test_the_fused_step_runs_fewer_ops(interpreted, monkeypatch, tiny_model_dir):
    """One layer's decode step on the CPU (projections to out_proj). The counts are printed for PROFILE.md
    (pytest -s); the torch path on CUDA differs (fla's kernel for the delta rule, Triton row stores for the states)."""
    layer, cache = layer_and_cache(tiny_model_dir("qwen3_5_moe"), torch.bfloat16)
    x = torch.randn(3, layer.out_proj.out_features).to(torch.bfloat16)
    unfused, ours = step_ops(monkeypatch, layer, cache, x, False), step_ops(monkeypatch, layer, cache, x, True)
    kernels = [[op for op in ops if op not in NO_KERNEL] for ops in (unfused, ours)]
    print(f"\nops of one Gated DeltaNet decode step: unfused {len(unfused)} aten ({len(kernels[0])} not views or "
          f"allocations), fused {len(ours)} ({len(kernels[1])})")
    print("unfused:", " ".join(kernels[0]))
    print("fused:", " ".join(kernels[1]))
    projections = kernels[0].count("mm")
    assert kernels[1].count("mm") == projections == 5  # in_proj_qkv, _z, _b, _a; out_proj
    assert sorted(op for op in kernels[1] if op != "mm") == ["triton:conv", "triton:delta", "triton:norm"]
    assert len(kernels[0]) - projections > 10 * (len(kernels[1]) - projections)


@pytest.mark.parametrize("model_type, decode", [("qwen3_5_moe", "static"), ("qwen3_next", "dynamic")])
def test_the_engines_greedy_tokens_are_the_unfused_paths(interpreted, monkeypatch, tiny_model_dir, model_type,
                                                         decode):
    """Prompts batched and decoded on the fused path: the tokens of the unfused path. qwen3_next's fused in_proj_ba
    hands the kernels strided gate projections; the static decode step is the one CUDA graphs hold."""
    from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams

    prompts = ["def fib(n):\n    return n", "class Stack:\n    def push(self, item):\n"]
    steps = []
    delta_step = deltanet_step_kernels.delta_step
    monkeypatch.setattr(deltanet_step_kernels, "delta_step", lambda *args: steps.append(args[1].shape[0]) or
                        delta_step(*args))
    tokens = []
    for on in (False, True):
        fused(monkeypatch, on)
        with Engine(EngineOptions(model=str(tiny_model_dir(model_type)), device="cpu", decode=decode)) as engine:
            handles = [engine.submit(GenerateRequest(prompt=p, sampling=SamplingParams(max_tokens=6,
                                                                                       ignore_eos=True)))
                       for p in prompts]
            tokens.append([h.result().token_ids for h in handles])
    assert tokens[1] == tokens[0]
    assert steps.count(2) >= 3 * 4  # three Gated DeltaNet layers, both sequences in each decode step


def compile_for_sm90() -> None:
    """Compile the kernels for sm_90 at qwen3.5-35b-a3b's heads in bf16 and check their PTX: FP contraction off
    leaves the conv's taps a multiply and an add each (the fma left are libdevice's exp's own), and no division is
    the approximate one. Needs Triton out of its interpreter (a process of its own under the test suite)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from engine.model import deltanet_step_triton as kernels

    def ptx(fn, signature: dict, constexprs: dict, **options) -> str:
        signature = dict(signature, **{name: "constexpr" for name in constexprs})
        source = ASTSource(fn=fn, signature=signature, constexprs=constexprs)
        return triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options).asm["ptx"]

    chains = {"slots_ptr": "*i64", "targets_ptr": "*i64", "lengths_ptr": "*i64"}
    conv = ({"x_ptr": "*bf16", "history_ptr": "*bf16", "weight_ptr": "*bf16", **chains, "out_ptr": "*bf16",
             "channels": "i32"}, {"TAPS": 4, "BLOCK": deltanet_step_kernels.CONV_BLOCK, "CHAINED": False})
    fused_taps = ptx(kernels.conv_step_kernel, *conv, num_warps=4, enable_fp_fusion=True)
    conv_ptx = ptx(kernels.conv_step_kernel, *conv, num_warps=4, **deltanet_step_kernels.NO_FUSION)
    assert conv_ptx.count("fma.") < fused_taps.count("fma."), (conv_ptx.count("fma."), fused_taps.count("fma."))
    delta = {"conv_ptr": "*bf16", "a_ptr": "*bf16", "b_ptr": "*bf16", "rate_ptr": "*fp32", "dt_bias_ptr": "*bf16",
             "state_ptr": "*fp32", **chains, "out_ptr": "*bf16", "channels": "i32", "key_scale": "fp32"}
    norm = {"x_ptr": "*bf16", "gate_ptr": "*bf16", "weight_ptr": "*bf16", "out_ptr": "*bf16", "eps": "fp32"}
    compiled = [conv_ptx, ptx(kernels.gated_norm_kernel, norm, {"DV": 128, "BV": 128, "ROUND_SCALED": True},
                              num_warps=1, **deltanet_step_kernels.NO_FUSION),
                ptx(kernels.conv_step_kernel, conv[0], dict(conv[1], CHAINED=True), num_warps=4,
                    **deltanet_step_kernels.NO_FUSION)]
    for tiled, is_chained in ((False, False), (True, False), (False, True)):
        heads = {"KEY_HEADS": 16, "HEADS": 32, "DK": 128, "DV": 128, "BK": 128,
                 "BV": deltanet_step_kernels.VALUE_BLOCK, "TILED": tiled, "STORES_DECAY": tiled, "CHAINED": is_chained}
        compiled.append(ptx(kernels.delta_step_kernel, delta, heads, num_warps=1, **deltanet_step_kernels.NO_FUSION))
    assert all("div.rn.f32" in code and "div.full" not in code for code in compiled)


def test_the_kernels_compile_for_cuda_without_fp_contraction():
    """No GPU needed: libdevice's exp and log1p, which the interpreter does not run, compile (compile_for_sm90)."""
    import subprocess

    env = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    script = "from tests.model.test_deltanet_step_kernels import compile_for_sm90; compile_for_sm90()"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def chained_decode(monkeypatch, layer, cache, x, sequences, on: bool):
    """A static-shape verify step's rows through layer.decode_padded (sequences: (state slot, number of rows))."""
    from engine.model.attention import PaddedDecodeMetadata

    chains = cache.chain(sequences)
    meta = PaddedDecodeMetadata(slot_mapping=torch.zeros(len(x), dtype=torch.long),
                                kv_index=torch.zeros(len(x), 1, dtype=torch.long),
                                lengths=torch.ones(len(x), dtype=torch.long),
                                state_slots=torch.tensor(chains.slots), state_sources=torch.tensor(chains.sources),
                                state_targets=torch.tensor(chains.targets), chain_lengths=torch.tensor(chains.lengths),
                                is_chained=chains.is_chained)
    fused(monkeypatch, on)
    with torch.no_grad():
        inputs, z = layer.mix_inputs(x)
        return layer.output(layer.decode_padded(meta, inputs, cache), z)


@pytest.mark.parametrize("dtype, tiled, stores_decay", CASES, ids=CASE_IDS)
def test_fused_chains_match_the_torch_path(interpreted, monkeypatch, tiny_model_dir, dtype, tiled, stores_decay):
    """A verify step's chains (a sequence of 3 rows, one of 1, one of 2) on the fused kernels and on the torch path
    (row by row from each row's source): the outputs, the slots' states after the step, and the scratch rows' states
    that roll_back reads, each position's."""
    layer, cache = layer_and_cache(tiny_model_dir("qwen3_5_moe"), dtype, tiled, stores_decay)
    cache.states = [tuple(torch.cat([s, torch.randn_like(s[:3], dtype=torch.float32).to(s.dtype)]) for s in states)
                    for states in cache.states]  # 3 scratch rows after the NUM_SEQS slots, holding garbage
    cache.num_verify_rows = 3
    reference = twin(cache)
    sequences = [(4, 3), (0, 1), (2, 2)]
    x = torch.randn(6, layer.out_proj.out_features, generator=torch.Generator().manual_seed(5)).to(dtype)
    ours = chained_decode(monkeypatch, layer, cache, x, sequences, on=True)
    ref = chained_decode(monkeypatch, layer, reference, x, sequences, on=False)
    assert_close(ours, ref)
    assert cache.verified_rows == reference.verified_rows == {4: [NUM_SEQS, NUM_SEQS + 1, 4], 2: [NUM_SEQS + 2, 2]}
    history, state = cache.states[layer.state_layer]
    ref_history, ref_state = reference.states[layer.state_layer]
    assert torch.equal(history, ref_history)
    assert_close(state, ref_state)


def test_fused_chains_compute_what_one_row_steps_compute(interpreted, monkeypatch, tiny_model_dir):
    """fp32 on the fused kernels (from the projections' rows to the delta rule's output; the CPU's matmul may round a
    row differently in another batch size): a chain of 3 rows gives the bits of 3 one-row decode steps of its
    sequence, and the state after each row (scratch rows, then the slot) the bits those steps leave in the slot."""
    layer, cache = layer_and_cache(tiny_model_dir("qwen3_5_moe"), torch.float32)
    assert_chain_is_one_row_steps(monkeypatch, layer, cache)


def assert_chain_is_one_row_steps(monkeypatch, layer, cache: HybridCache) -> None:
    """On the fused kernels, a chain of 3 rows of slot 1 (through 2 scratch rows added to the cache) against 3
    one-row decode steps of a twin cache: the delta rule's outputs and the states after each row, bitwise."""
    from engine.model.attention import PaddedDecodeMetadata

    device = layer.out_proj.weight.device
    cache.states = [tuple(torch.cat([s, torch.zeros_like(s[:2])]) for s in states) for states in cache.states]
    cache.num_verify_rows = 2
    steps = twin(cache)
    fused(monkeypatch, True)
    x = torch.randn(3, layer.out_proj.out_features, generator=torch.Generator().manual_seed(6))
    x = x.to(device=device, dtype=layer.out_proj.weight.dtype)
    chains = cache.chain([(1, 3)])
    index = lambda values: torch.tensor(values, device=device)  # noqa: E731
    meta = PaddedDecodeMetadata(slot_mapping=index([0] * 3), kv_index=index([[0]] * 3), lengths=index([1] * 3),
                                state_slots=index(chains.slots), state_sources=index(chains.sources),
                                state_targets=index(chains.targets), chain_lengths=index(chains.lengths),
                                is_chained=True)
    with torch.no_grad():
        inputs, _ = layer.mix_inputs(x)
        chained = layer.decode_padded(meta, inputs, cache)
        for row, kept in enumerate(cache.verified_rows[1]):
            one = layer.decode(index([1]), tuple(t[row : row + 1] for t in inputs), steps)
            assert torch.equal(one, chained[row : row + 1])
            for state, stepped in zip(cache.states[layer.state_layer], steps.states[layer.state_layer]):
                assert torch.equal(state[kept], stepped[1])
