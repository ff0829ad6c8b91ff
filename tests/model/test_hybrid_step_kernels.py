"""The hybrids' (qwen3_next, qwen3_5_moe) decode-step kernels beside the Gated DeltaNet's, under the Triton interpreter
on the CPU against the torch ops they replace: the zero-centred RMSNorm alone and after the residual add
(engine.model.centred_norm_kernels), GatedAttention's q/k norm, RoPE and KV write in one kernel
(engine.model.fused_qk_rope); the ops of one decode step per layer kind; the engine's greedy tokens.
tests/gpu/test_hybrid_step_gpu.py runs them on CUDA."""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from engine.model import centred_norm_kernels, deltanet_step_kernels, gate_kernels, moe_tail_kernels
from engine.model.attention import KVCache
from engine.model.config_file import read_args
from engine.model.hybrid_layers import GatedAttention, ZeroCenteredRMSNorm
from engine.model.layers import RotaryEmbedding, apply_rope
from tests.model.test_deltanet_step_kernels import NO_KERNEL, round_to_nearest_even

pytest.importorskip("triton")
KERNEL_MODULES = ("engine.model.centred_norm_triton", "engine.model.fused_qk_rope", "engine.model.moe_tail_triton",
                  "engine.model.gate_triton", "engine.model.deltanet_step_triton")
BUILT = (centred_norm_kernels._built, moe_tail_kernels._built, gate_kernels._built, deltanet_step_kernels._built)
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-5}, torch.bfloat16: {"atol": 1e-2, "rtol": 2**-7}}


@pytest.fixture
def interpreted(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    round_to_nearest_even(monkeypatch)
    for module in KERNEL_MODULES:
        monkeypatch.delitem(sys.modules, module, raising=False)  # their kernels interpreted
    for built in BUILT:
        built.clear()
    yield
    for built in BUILT:
        built.clear()


def fused(monkeypatch, on: bool):
    """The hybrid step's kernels on or off; the DeltaNet's fused step on in both (as on CUDA)."""
    monkeypatch.setattr(centred_norm_kernels, "applies", lambda x: on)
    monkeypatch.setattr(moe_tail_kernels, "applies", lambda x: on)
    monkeypatch.setattr(gate_kernels, "applies", lambda x: on)
    monkeypatch.setattr(deltanet_step_kernels, "applies", lambda x: True)


def centred_norm(dtype, one_added: bool, size=96) -> ZeroCenteredRMSNorm:
    norm = ZeroCenteredRMSNorm(size, 1e-6, one_added)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(size, generator=torch.Generator().manual_seed(size)) * 0.3 + one_added)
    return norm if one_added else norm.to(dtype)  # llama.cpp's 1 + weight stays fp32 (keeps_fp32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("one_added", [False, True], ids=["centred", "one-added"])
def test_centred_norm_and_add_as_the_torch_ops(interpreted, monkeypatch, dtype, one_added):
    norm = centred_norm(dtype, one_added)
    generator = torch.Generator().manual_seed(1)
    x = (torch.randn(5, 96, generator=generator) * 3).to(dtype)
    delta = torch.randn(5, 96, generator=generator).to(dtype)
    with torch.no_grad():
        fused(monkeypatch, False)
        expected, expected_sum = norm(x), x + delta
        expected_normed_sum = norm(expected_sum)
        fused(monkeypatch, True)
        got = norm(x)
        total, normed_sum = norm.add_forward(x, delta)
    assert got.dtype == normed_sum.dtype == dtype
    assert torch.equal(total, expected_sum)  # rounded to the dtype as torch's add rounds
    torch.testing.assert_close(got, expected, **TOLERANCE[dtype])
    torch.testing.assert_close(normed_sum, expected_normed_sum, **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_moe_tail_as_the_torch_ops(interpreted, dtype):
    generator = torch.Generator().manual_seed(2)
    x, routed, shared = ((torch.randn(3, 2100, generator=generator) * scale).to(dtype) for scale in (4, 1, 1))
    gate = (torch.randn(3, 1, generator=generator) * 3).to(dtype)
    out = torch.full_like(x, 7.0)
    got = moe_tail_kernels.gated_residual_sum(x, routed, moe_tail_kernels.GatedShared(gate, shared), out=out)
    expected = x + (routed + torch.sigmoid(gate) * shared)
    assert got is out
    torch.testing.assert_close(got, expected, **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_gates_as_the_torch_ops(interpreted, dtype):
    generator = torch.Generator().manual_seed(3)
    gate, up = ((torch.randn(3, 1500, generator=generator) * 3).to(dtype) for _ in range(2))
    torch.testing.assert_close(gate_kernels.silu_mul(gate, up), torch.nn.functional.silu(gate) * up,
                               **TOLERANCE[dtype])
    x = torch.randn(3, 4, 48, generator=generator).to(dtype)
    q_and_gate = (torch.randn(3, 4, 96, generator=generator) * 3).to(dtype)
    gate = q_and_gate[..., 48:]  # strided: q_proj's output holds q and the gate per head
    expected = (x.reshape(3, -1) * torch.sigmoid(gate.reshape(3, -1))).view(3, 4, 48)
    torch.testing.assert_close(gate_kernels.sigmoid_gate(x, gate), expected, **TOLERANCE[dtype])


def gated_attention(folder, dtype, one_added: bool):
    args = read_args(folder)
    if one_added:
        args = dataclasses.replace(args, linear=dataclasses.replace(args.linear, llama_cpp_values=True))
    torch.manual_seed(0)
    layer = GatedAttention(args, kv_layer=0)
    with torch.no_grad():
        for name, p in layer.named_parameters():
            p.copy_(torch.randn_like(p) * (0.3 if p.ndim > 1 else 1.0) + ("norm" in name and one_added))
    layer = layer.to(dtype)
    if one_added:
        layer.q_norm.weight.data, layer.k_norm.weight.data = (n.weight.data.float() for n in (layer.q_norm,
                                                                                              layer.k_norm))
    return args, layer


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("one_added", [False, True], ids=["centred", "one-added"])
def test_gated_attentions_fused_turn_and_store_as_the_torch_ops(interpreted, monkeypatch, tiny_model_dir, dtype,
                                                                one_added):
    """q's heads are views at twice the head width (q_proj's output holds q and the gate per head): the kernel
    reads them in place. Partial RoPE (the tiny model turns a quarter of each head)."""
    args, layer = gated_attention(tiny_model_dir("qwen3_5_moe"), dtype, one_added)
    x = torch.randn(3, args.hidden_size).to(dtype)
    rope = RotaryEmbedding(args.rotary_dim, args.rope_theta)(torch.tensor([0, 7, 400]), dtype)
    assert rope[0].shape[1] < layer.head_dim
    slots, results = torch.tensor([5, 0, 9]), []
    for on in (False, True):
        fused(monkeypatch, on)
        cache = KVCache(1, 12, layer.num_kv_heads, layer.head_dim, dtype, "cpu")
        for pool in cache.pools():
            pool[0].fill_(7.0)
        with torch.no_grad():
            q, gate = layer.gated_turn_and_store(x, rope, slots, cache)
        results.append((q, gate, cache.k[0], cache.v[0]))
    (q, gate, k, v), (q_fused, gate_fused, k_fused, v_fused) = results
    assert torch.equal(gate_fused, gate) and torch.equal(v_fused, v)  # values copied, the other slots untouched
    torch.testing.assert_close(q_fused, q, **TOLERANCE[dtype])
    torch.testing.assert_close(k_fused, k, **TOLERANCE[dtype])
    assert torch.equal(k_fused[[1, 2, 3, 4, 6, 7, 8, 10, 11]], k[[1, 2, 3, 4, 6, 7, 8, 10, 11]])


def test_the_torch_path_of_gated_attention_turns_the_normed_q_and_k(tiny_model_dir):
    """The reference of the test above: q_norm then RoPE, op by op."""
    args, layer = gated_attention(tiny_model_dir("qwen3_5_moe"), torch.float32, False)
    x = torch.randn(2, args.hidden_size)
    rope = RotaryEmbedding(args.rotary_dim, args.rope_theta)(torch.tensor([3, 4]), torch.float32)
    cache = KVCache(1, 4, layer.num_kv_heads, layer.head_dim, torch.float32, "cpu")
    with torch.no_grad():
        q, _ = layer.gated_turn_and_store(x, rope, torch.tensor([1, 2]), cache)
        heads = layer.q_proj(x).view(2, layer.num_heads, 2 * layer.head_dim)[..., : layer.head_dim]
        assert torch.equal(q, apply_rope(layer.q_norm(heads), *rope))


class CountOps(TorchDispatchMode):
    """The aten ops dispatched, each Triton launch as one "triton:<kernel>" (what the interpreter runs inside a launch
    is not counted)."""

    def __init__(self, ops: list[str]):
        super().__init__()
        self.ops = ops

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func.overloadpacket.__name__))
        return func(*args, **(kwargs or {}))


def count_launches(monkeypatch, ops_of_thread: dict):
    """Every interpreted Triton launch recorded as one op of the counting thread's list, its inside not counted."""
    from triton.runtime.interpreter import InterpretedFunction

    run = InterpretedFunction.run

    def counted_run(self, *args, **kwargs):
        ops = ops_of_thread.get(threading.get_ident())
        if ops is None:
            return run(self, *args, **kwargs)
        ops.append(f"triton:{self.__name__}")
        with _disable_current_modes():
            return run(self, *args, **kwargs)

    monkeypatch.setattr(InterpretedFunction, "run", counted_run)


def first_decode_step_ops(monkeypatch, folder, on: bool) -> dict[int, list[str]]:
    """Layer -> the ops of its part of the first static decode step (two sequences): dense_part and finish."""
    from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
    from engine.model.hybrid import HybridDecoderLayer

    fused(monkeypatch, on)
    per_layer: dict[int, list[str]] = {}
    ops_of_thread: dict = {}
    count_launches(monkeypatch, ops_of_thread)

    counted, index_of = set(), {}

    def counting(name: str):
        method = getattr(HybridDecoderLayer, name)

        def run(layer, *args, **kwargs):
            index = index_of[id(layer)]
            is_decode = (index, "dense_part") in counted or name == "dense_part"  # forward ends in finish too
            if (index, name) in counted or not is_decode:
                return method(layer, *args, **kwargs)
            counted.add((index, name))
            ops = per_layer.setdefault(index, [])
            ops_of_thread[threading.get_ident()] = ops
            try:
                with CountOps(ops):
                    return method(layer, *args, **kwargs)
            finally:
                del ops_of_thread[threading.get_ident()]
        return run

    options = EngineOptions(model=str(folder), device="cpu", dtype="bfloat16", decode="static")
    with monkeypatch.context() as patch, Engine(options) as engine:
        for name in ("dense_part", "finish"):
            patch.setattr(HybridDecoderLayer, name, counting(name))
        index_of.update((id(layer), index) for index, layer in enumerate(engine._core.runner.model.layers))
        sampling = SamplingParams(max_tokens=2, ignore_eos=True)
        handles = [engine.submit(GenerateRequest(prompt=p, sampling=sampling)) for p in ("def f(x):", "class A:")]
        assert all(h.result().error is None for h in handles)
    return per_layer


def test_a_decode_step_runs_fewer_ops_per_layer(interpreted, monkeypatch, tiny_model_dir):
    """The first static decode step of the tiny qwen3_5_moe in bf16 (two sequences), each layer's dense_part and
    finish: the ops on the torch path of the norms and q/k against the fused one (the DeltaNet's fused step on in
    both). The counts are printed (pytest -s); the CUDA path differs where the CPU keeps torch ops (RoPE, the KV
    and router kernels, the quantized GEMVs)."""
    folder = tiny_model_dir("qwen3_5_moe")
    kinds = read_args(folder).layer_types
    unfused, ours = (first_decode_step_ops(monkeypatch, folder, on) for on in (False, True))
    by_kind = {}
    for layer, kind in enumerate(kinds):
        counts = [[op for op in ops[layer] if op not in NO_KERNEL] for ops in (unfused, ours)]
        print(f"\nlayer {layer} ({kind}): torch {len(unfused[layer])} aten ops ({len(counts[0])} not views or "
              f"allocations), fused {len(ours[layer])} ({len(counts[1])})")
        print("  torch:", " ".join(counts[0]))
        print("  fused:", " ".join(counts[1]))
        by_kind.setdefault(kind, counts)
        assert counts == by_kind[kind]  # each layer of a kind runs the same ops
    for kind, (torch_ops, fused_ops) in by_kind.items():
        launches = Counter(op for op in fused_ops if op.startswith("triton:"))
        assert launches["triton:centred_norm_kernel"] == launches["triton:add_centred_norm_kernel"] == 1, kind
        assert launches["triton:qk_rope_store_kernel"] == (kind == "full_attention"), kind
        assert launches["triton:gated_residual_sum_kernel"] == 1, kind
        assert not {"pow", "mean", "rsqrt", "type_as", "cat", "neg", "index_copy_"} & set(fused_ops), kind
        assert launches["triton:silu_mul_kernel"] == 1, kind
        assert launches["triton:sigmoid_gate_kernel"] == (kind == "full_attention"), kind
        assert "sigmoid" not in fused_ops, kind
    assert {kind: (len(torch_ops), len(fused_ops)) for kind, (torch_ops, fused_ops) in by_kind.items()} == {
        "linear_attention": (76, 53), "full_attention": (113, 54)}


@pytest.mark.parametrize("model_type, decode", [("qwen3_5_moe", "static"), ("qwen3_next", "dynamic")])
def test_the_engines_greedy_tokens_are_the_torch_paths(interpreted, monkeypatch, tiny_model_dir, model_type, decode):
    """Prompts batched, prefilled and decoded with the norms and q/k fused: the tokens of the torch path."""
    from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams

    prompts = ["def fib(n):\n    return n", "class Stack:\n    def push(self, item):\n"]
    launches = []
    add_norm = centred_norm_kernels.add_centred_rms_norm
    monkeypatch.setattr(centred_norm_kernels, "add_centred_rms_norm",
                        lambda *args: launches.append(args[0].shape[0]) or add_norm(*args))
    tokens = []
    for on in (False, True):
        fused(monkeypatch, on)
        with Engine(EngineOptions(model=str(tiny_model_dir(model_type)), device="cpu", decode=decode)) as engine:
            sampling = SamplingParams(max_tokens=6, ignore_eos=True)
            handles = [engine.submit(GenerateRequest(prompt=p, sampling=sampling)) for p in prompts]
            tokens.append([h.result().token_ids for h in handles])
    assert tokens[1] == tokens[0]
    assert launches.count(2) >= 4 * 4  # four layers, both sequences in each decode step


def compile_for_sm90() -> None:
    """Compile the kernels for sm_90 in bf16 at qwen3.5-35b-a3b's widths (hidden 2048, heads of 256 turning 64) and
    check their PTX: no approximate division (the sigmoid's is torch's IEEE one). Needs Triton out of its
    interpreter (a process of its own under the test suite)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from engine.model import centred_norm_triton, fused_qk_rope, gate_triton, moe_tail_triton

    def ptx(fn, signature: dict, constexprs: dict, **options) -> str:
        signature = dict(signature, **{name: "constexpr" for name in constexprs})
        source = ASTSource(fn=fn, signature=signature, constexprs=constexprs)
        return triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options).asm["ptx"]

    rows = {"x_ptr": "*bf16", "w_ptr": "*fp32", "out_ptr": "*bf16", "D": "i32", "eps": "fp32", "offset": "fp32"}
    norm = ptx(centred_norm_triton.centred_norm_kernel, rows, {"BLOCK": 2048}, num_warps=8, enable_fp_fusion=False)
    add_rows = dict(rows, delta_ptr="*bf16", sum_ptr="*bf16")
    add_rows = {name: add_rows[name] for name in ("x_ptr", "delta_ptr", "w_ptr", "sum_ptr", "out_ptr", "D", "eps",
                                                  "offset")}
    add_norm = ptx(centred_norm_triton.add_centred_norm_kernel, add_rows, {"BLOCK": 2048}, num_warps=8,
                   enable_fp_fusion=False)
    qk = {name: "*bf16" for name in ("q_ptr", "k_ptr", "v_ptr", "q_weight_ptr", "k_weight_ptr", "cos_ptr", "sin_ptr")}
    qk.update(slots_ptr="*i64", q_out_ptr="*bf16", k_cache_ptr="*bf16", v_cache_ptr="*bf16", q_stride="i32",
              q_head_stride="i32", k_stride="i32", v_stride="i32", H="i32", KVH="i32", D="i32", eps="fp32",
              offset="fp32")
    turn = ptx(fused_qk_rope.qk_rope_store_kernel, qk, {"NORM": True, "CENTRED": True, "ROT": 64, "BD": 256},
               num_warps=4)
    tail = {"x_ptr": "*bf16", "routed_ptr": "*bf16", "gate_ptr": "*bf16", "shared_ptr": "*bf16", "out_ptr": "*bf16",
            "D": "i32"}
    tail_ptx = ptx(moe_tail_triton.gated_residual_sum_kernel, tail, {"BLOCK": 1024}, num_warps=4,
                   enable_fp_fusion=False)
    silu_rows = {"gate_ptr": "*bf16", "up_ptr": "*bf16", "out_ptr": "*bf16", "width": "i32"}
    silu = ptx(gate_triton.silu_mul_kernel, silu_rows, {"BLOCK": 1024}, num_warps=4, enable_fp_fusion=False)
    sigmoid = ptx(gate_triton.sigmoid_gate_kernel, {"x_ptr": "*bf16", "gate_ptr": "*bf16", "out_ptr": "*bf16",
                                                    "gate_row_stride": "i32", "gate_head_stride": "i32"},
                  {"HEAD": 256, "BLOCK": 256}, num_warps=4, enable_fp_fusion=False)
    assert all(code.count(".entry") == 1 for code in (norm, add_norm, turn, tail_ptx, silu, sigmoid))
    assert all("div.rn.f32" in code and "div.full" not in code for code in (tail_ptx, silu, sigmoid))


def test_the_kernels_compile_for_cuda():
    """No GPU needed: what the interpreter does not check (types, libdevice's exp) compiles (compile_for_sm90)."""
    import os
    import subprocess

    env = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    script = "from tests.model.test_hybrid_step_kernels import compile_for_sm90; compile_for_sm90()"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
