"""The Triton decode-attention kernel (engine.model.decode_attention), in Triton's interpreter on the CPU:
the same values as SDPA, and bits that depend neither on the padding nor on where the cache slots live."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from engine.errors import RequestError
from engine.model.decode_attention import decode_attention
from engine.model.kv_store import store_kv
from tests.runtime.test_static_decode import SAMPLING, run_all

H, KVH, D, SLOTS = 8, 2, 16, 700


def case(seed: int = 0, lengths=(5, 600, 1)):  # 600: ten of the kernel's 64-position chunks
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(len(lengths), H, D, generator=generator)
    k = torch.randn(SLOTS, KVH, D, generator=generator)
    v = torch.randn(SLOTS, KVH, D, generator=generator)
    index = torch.zeros(len(lengths), 640, dtype=torch.long)
    for row, length in enumerate(lengths):
        index[row, :length] = torch.randperm(SLOTS, generator=generator)[:length]
    return q, k, v, index, torch.tensor(lengths)


def sdpa(q, k, v, index, lengths):
    out = []
    for row, length in enumerate(lengths.tolist()):
        keys, values = k[index[row, :length]].transpose(0, 1), v[index[row, :length]].transpose(0, 1)  # [KVH, L, D]
        o = F.scaled_dot_product_attention(q[row][:, None, :].unsqueeze(0), keys[None], values[None],
                                           scale=D**-0.5, enable_gqa=True)  # [1, H, 1, D]
        out.append(o[0, :, 0])
    return torch.stack(out)


def test_matches_sdpa():
    q, k, v, index, lengths = case()
    torch.testing.assert_close(decode_attention(q, k, v, index, lengths, D**-0.5), sdpa(q, k, v, index, lengths),
                               atol=1e-5, rtol=1e-5)


def test_bits_do_not_depend_on_padding_batch_or_slot_placement():
    q, k, v, index, lengths = case()
    reference = decode_attention(q, k, v, index, lengths, D**-0.5)
    wider = torch.zeros(3, 1100, dtype=torch.long)
    wider[:, :640] = index  # padded further, as a larger max_model_len would
    assert torch.equal(decode_attention(q, k, v, wider, lengths, D**-0.5), reference)
    alone = decode_attention(q[1:2], k, v, index[1:2], lengths[1:2], D**-0.5)  # batch of one
    assert torch.equal(alone[0], reference[1])
    moved = torch.randperm(SLOTS)  # the same keys and values in other slots (another KV pool layout)
    k2, v2 = torch.empty_like(k), torch.empty_like(v)
    k2[moved], v2[moved] = k, v
    assert torch.equal(decode_attention(q, k2, v2, moved[index], lengths, D**-0.5), reference)


def test_kv_store_kernel_writes_rows_at_their_slots():
    k_cache, v_cache = torch.zeros(SLOTS, KVH, D), torch.zeros(SLOTS, KVH, D)
    k, v = torch.randn(3, KVH, D), torch.randn(3, KVH, D)
    slots = torch.tensor([7, 150, 0])
    store_kv(k_cache, v_cache, slots, k, v)
    assert torch.equal(k_cache[slots], k) and torch.equal(v_cache[slots], v)
    untouched = torch.ones(SLOTS, dtype=torch.bool)
    untouched[slots] = False
    assert not k_cache[untouched].any() and not v_cache[untouched].any()


@pytest.mark.slow  # the Triton interpreter, every architecture: about 4 minutes on 2 cores
def test_engine_with_triton_attention_keeps_expert_modes_bitwise_equal(tiny_model_dir, model_type):
    folder = tiny_model_dir(model_type)
    reference = run_all(folder, decode="static", attention="triton")
    paged = run_all(folder, decode="static", attention="triton", experts="paged", expert_slots=3)
    assert paged == reference
    assert run_all(folder, decode="dynamic", attention="triton") == reference  # eager decode: the same kernel
    sdpa_tokens = [tokens for tokens, _ in run_all(folder, decode="static", attention="sdpa")]
    assert [tokens for tokens, _ in reference] == sdpa_tokens and len(sdpa_tokens[0]) == SAMPLING.max_tokens


def test_the_cli_and_the_device_choose_the_decode_attention(monkeypatch):
    from engine.cli import build_parser
    from engine.cli.options import engine_options
    from engine.config import EngineOptions
    from engine.runtime.builder import decode_attention_kernel

    parser = build_parser()
    assert engine_options(parser.parse_args(["run", "--prompt", "hi"])).attention == "auto"
    assert engine_options(parser.parse_args(["run", "--prompt", "hi", "--attention", "sdpa"])).attention == "sdpa"
    cpu = torch.device("cpu")
    assert decode_attention_kernel(EngineOptions(), cpu) == "sdpa"  # Triton needs a GPU
    assert decode_attention_kernel(EngineOptions(attention="triton"), cpu) == "triton"  # asked for: the interpreter
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # a CPU without Triton's interpreter: a readable refusal
    with pytest.raises(RequestError, match="needs a CUDA GPU"):
        decode_attention_kernel(EngineOptions(attention="triton"), cpu)


def test_merge_over_several_loads_keeps_values_and_bits(monkeypatch):
    """Chunks merged a few per load (as a long context merges them): the same values as SDPA, and bits that the
    padding (more, empty chunks) does not change, with and without a window that skips whole loads."""
    import engine.model.decode_attention as kernel

    monkeypatch.setattr(kernel, "CHUNK", 16)  # 600 positions: 38 chunks
    monkeypatch.setattr(kernel, "MAX_CHUNKS_PER_LOAD", 4)  # merged 4 at a time: 10 loads
    q, k, v, index, lengths = case()
    merged = {window: decode_attention(q, k, v, index, lengths, D**-0.5, window) for window in (None, 200)}
    torch.testing.assert_close(merged[None], sdpa(q, k, v, index, lengths), atol=1e-5, rtol=1e-5)
    wider = torch.zeros(3, 1100, dtype=torch.long)
    wider[:, :640] = index
    for window, reference in merged.items():
        assert torch.equal(decode_attention(q, k, v, wider, lengths, D**-0.5, window), reference)
