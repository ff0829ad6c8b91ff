"""Triton kernels of the device-side pager: one layer-step's LRU bookkeeping and its miss copies run on the
GPU, so a whole decode step (every layer, hits and misses) runs as CUDA graphs with no host round trip.

`lru_step` (one program per layer-step) reads the step's routed ids and the layer's slot state, and writes
the pool row of every (token, k) entry, the misses to copy (expert -> row) and the new state. The rule is
engine.alloc.expert_lru's: needed experts are touched in order of first appearance; a miss takes a free
slot, else the least recently used slot whose expert this step does not need. Stamps are
clock * STAMP_STRIDE + first appearance, so recency ties break exactly as on the host. A step that needs
more experts than the layer has slots (batched decode at a small budget) gives the misses past the last
free or evictable slot no slot: they are listed per entry, to be copied straight into the step's gathered
buffer, and stay uncached (the host pager's rule too).

`copy_rows` copies the missed experts from pinned host memory (read in place over the PCIe link, a
zero-copy read) into their slots; entries that are not misses return at once."""

from __future__ import annotations

import os

from engine.system.triton_support import HAS_TRITON

STAMP_STRIDE = 1024  # > entries of any graphed step; host-pushed stamps stay below clock * STAMP_STRIDE

_built: dict[bool, tuple] = {}


def runs_on(device) -> bool:
    """Can the kernels run for tensors on `device`: CUDA with Triton, or the CPU under Triton's interpreter."""
    return HAS_TRITON and (device.type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1")


def kernels(interpret: bool = False):
    """-> (lru_step, copy_rows) jitted; interpret=True runs them on CPU tensors (Triton's interpreter)."""
    if interpret not in _built:
        if interpret:  # the interpreter reads this while kernels run, so it stays set (tests only)
            os.environ["TRITON_INTERPRET"] = "1"
        _built[interpret] = _define()
    return _built[interpret]


def _define():
    import triton
    import triton.language as tl

    # The ints that change with the split (slots, pool base) are not specialised on: a resize must not compile.
    @triton.jit(do_not_specialize=["N", "E", "S", "base"])
    def lru_step(ids_ptr, es_ptr, se_ptr, lu_ptr, clock_ptr, counts_ptr, rows_ptr, miss_src_ptr, miss_dst_ptr,
                 over_src_ptr, over_dst_ptr, N, E, S, base, FORGET: tl.constexpr, NB: tl.constexpr,
                 BE: tl.constexpr, BS: tl.constexpr, STRIDE: tl.constexpr):
        n = tl.arange(0, NB)
        n_ok = n < N
        ids = tl.load(ids_ptr + n, mask=n_ok, other=-1).to(tl.int32)
        e = tl.arange(0, BE)
        s = tl.arange(0, BS)
        s_ok = s < S
        hit_ids = ids[None, :] == e[:, None]  # [BE, NB]
        first = tl.min(tl.where(hit_ids, n[None, :], NB), axis=1)  # first appearance of expert e, NB if unused
        need = first < NB
        if FORGET:  # no cache between steps (the static-UVA baseline): everything starts empty
            es = tl.full([BE], -1, tl.int32)
            se = tl.full([BS], -1, tl.int32)
            lu = tl.full([BS], -1, tl.int64)
        else:
            es = tl.load(es_ptr + e, mask=e < E, other=-1)
            se = tl.load(se_ptr + s, mask=s_ok, other=-1)
            lu = tl.load(lu_ptr + s, mask=s_ok, other=-1)
        miss_e = need & (es < 0)
        num_hits = tl.sum((need & (es >= 0)).to(tl.int32), axis=0)
        num_miss = tl.sum(miss_e.to(tl.int32), axis=0)
        new_se, new_es, num_evicted = se, es, num_miss * 0
        over = tl.zeros([BE], tl.int1)  # misses with no slot left this step (more needed experts than slots)
        src = tl.full([NB], -1, tl.int64)  # the copies to make, in miss order: expert -> pool row
        dst = tl.zeros([NB], tl.int64)
        if num_miss > 0:
            # Slots a miss may take: those whose expert this step does not need (free slots have the key -1).
            slot_needed = tl.max(((se[:, None] == ids[None, :]) & (se[:, None] >= 0)).to(tl.int32), axis=1) > 0
            big = tl.full([BS], 2**62, tl.int64)
            key = tl.where(s_ok & ~slot_needed, lu, big)
            num_placed = tl.minimum(num_miss, tl.sum((key < big).to(tl.int32), axis=0))
            # The r-th miss (in order of first appearance) takes the r-th victim (smallest key, then slot); misses
            # past the last victim are read straight into the step's gathered buffer and not cached. One pass per
            # placed miss over [slots] and [experts] vectors, not a [slots, slots] ranking: a few times faster at a
            # handful of misses, with 512 bytes of shared memory instead of 16 KB (bench/lru_step_probe.py).
            order = tl.where(miss_e, first, NB)
            r = num_placed * 0
            while r < num_placed:
                low = tl.min(key, axis=0)
                victim = tl.min(tl.where(key == low, s, BS), axis=0)
                expert = tl.min(tl.where(order == tl.min(order, axis=0), e, BE), axis=0)
                old = tl.max(tl.where(s == victim, new_se, -1), axis=0)  # each slot is a victim at most once
                new_es = tl.where(e == expert, victim, tl.where(e == old, -1, new_es))
                new_se = tl.where(s == victim, expert, new_se)
                num_evicted += (old >= 0).to(tl.int32)
                key = tl.where(s == victim, big, key)
                order = tl.where(e == expert, NB, order)
                src = tl.where(n == r, expert.to(tl.int64), src)
                dst = tl.where(n == r, victim.to(tl.int64), dst)
                r += 1
            over = order < NB
        tl.store(miss_src_ptr + n, src, mask=n_ok)
        tl.store(miss_dst_ptr + n, base + dst, mask=n_ok)
        # Entries whose expert got no slot: copied from the host into row n of the gathered buffer.
        entry_over = tl.max((hit_ids & over[:, None]).to(tl.int32), axis=0) > 0  # [NB]
        tl.store(over_src_ptr + n, tl.where(entry_over, ids, -1).to(tl.int64), mask=n_ok)
        tl.store(over_dst_ptr + n, n.to(tl.int64), mask=n_ok)
        # Touch the needed experts: stamp = clock * STRIDE + first appearance.
        clock = tl.load(clock_ptr)
        slot_first = tl.min(tl.where((new_se[:, None] == ids[None, :]) & n_ok[None, :], n[None, :], NB), axis=1)
        new_lu = tl.where(slot_first < NB, clock * STRIDE + slot_first, lu)
        # This step's output: the pool row of every (token, k) entry.
        entry_slot = tl.maximum(tl.sum(tl.where(hit_ids, new_es[:, None], 0), axis=0), 0)  # [NB]
        tl.store(rows_ptr + n, (base + entry_slot).to(tl.int64), mask=n_ok)
        if not FORGET:
            tl.store(es_ptr + e, new_es, mask=e < E)
            tl.store(se_ptr + s, new_se, mask=s_ok)
            tl.store(lu_ptr + s, new_lu, mask=s_ok)
            tl.store(clock_ptr, clock + 1)
        tl.store(counts_ptr, tl.load(counts_ptr) + num_hits.to(tl.int64))
        tl.store(counts_ptr + 1, tl.load(counts_ptr + 1) + num_miss.to(tl.int64))
        tl.store(counts_ptr + 2, tl.load(counts_ptr + 2) + num_evicted.to(tl.int64))

    @triton.jit
    def copy_rows(src_ptr, dst_ptr, miss_src_ptr, miss_dst_ptr, words, CHUNK: tl.constexpr, SPLIT: tl.constexpr,
                  ITERS: tl.constexpr):
        r = tl.program_id(0)
        part = tl.program_id(1)
        expert = tl.load(miss_src_ptr + r)
        if expert >= 0:
            row = tl.load(miss_dst_ptr + r)
            src = src_ptr + expert * words
            dst = dst_ptr + row * words
            for i in range(ITERS):
                offsets = (i * SPLIT + part) * CHUNK + tl.arange(0, CHUNK)
                ok = offsets < words
                tl.store(dst + offsets, tl.load(src + offsets, mask=ok, cache_modifier=".cg"), mask=ok)

    return lru_step, copy_rows


def next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())
