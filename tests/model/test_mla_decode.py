"""The MLA decode kernel (engine.model.mla_decode) under Triton's interpreter: the attention it computes, bits
that do not depend on batch, padding or slot placement, and the absorbed form equal to the expanded one."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from engine.model.mla_decode import absorb_output, absorb_query, heads_per_program, latent_decode

R, P, N, V = 32, 8, 16, 12
SLOTS = 700


def reference(q_rows, pool, slots, scale):
    """fp64 softmax(q . rows) . c_kv of one sequence: q_rows [H, R + P], slots [L] -> [H, R]."""
    rows = pool[slots, 0].double()  # [L, R + P]
    weights = torch.softmax(q_rows.double() @ rows.T * scale, dim=-1)
    return weights @ rows[:, :R]


@pytest.mark.parametrize("heads, length", [(4, 5), (12, 70), (32, 300)])
def test_latent_decode_is_attention_over_the_rows(heads, length):
    torch.manual_seed(0)
    pool = torch.randn(SLOTS, 1, R + P)
    q_rows = torch.randn(1, heads, R + P)
    slots = torch.randperm(SLOTS)[:length]
    out = latent_decode(q_rows, pool, slots[None], torch.tensor([length], dtype=torch.int32), R, 0.3)
    torch.testing.assert_close(out[0].double(), reference(q_rows[0], pool, slots, 0.3), rtol=1e-5, atol=1e-5)


def test_bits_do_not_depend_on_batch_padding_or_slot_placement():
    torch.manual_seed(1)
    pool = torch.randn(SLOTS, 1, R + P)
    q_rows = torch.randn(3, 16, R + P)
    lengths = [40, 290, 7]
    index = torch.zeros(3, 512, dtype=torch.long)
    for b, length in enumerate(lengths):
        index[b, :length] = torch.randperm(SLOTS)[:length]
    batch = latent_decode(q_rows, pool, index, torch.tensor(lengths, dtype=torch.int32), R, 0.25)
    moved = torch.randn(SLOTS, 1, R + P)  # the second sequence's rows copied to other slots
    new_slots = torch.randperm(SLOTS)[: lengths[1]]
    moved[new_slots] = pool[index[1, : lengths[1]]]
    alone = latent_decode(q_rows[1:2], moved, new_slots[None], torch.tensor(lengths[1:2], dtype=torch.int32), R, 0.25)
    assert torch.equal(alone[0], batch[1])


def test_absorbed_decode_equals_expanded_attention():
    torch.manual_seed(2)
    H, L = 4, 50
    kv_b = torch.randn(H * (N + V), R) * 0.2
    rows = torch.randn(L, R + P)
    q = torch.randn(1, H, N + P)
    kv = F.linear(rows[:, :R], kv_b).view(L, H, N + V)
    keys = torch.cat((kv[..., :N], rows[:, None, R:].expand(L, H, P)), -1)  # [L, H, N + P]
    expanded = F.scaled_dot_product_attention(q.transpose(0, 1), keys.transpose(0, 1), kv[..., N:].transpose(0, 1),
                                              scale=0.2)  # [H, 1, V]
    latent = latent_decode(absorb_query(q, kv_b, N), rows[:, None], torch.arange(L)[None],
                           torch.tensor([L], dtype=torch.int32), R, 0.2)
    torch.testing.assert_close(absorb_output(latent, kv_b, N)[0], expanded[:, 0], rtol=1e-4, atol=1e-5)


def test_head_blocks_tile_the_heads():
    assert [heads_per_program(h) for h in (4, 12, 16, 64, 128, 20)] == [4, 12, 16, 16, 16, 10]
