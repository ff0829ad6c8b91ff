"""A large layer-step's dispatch planned on the device in three Triton launches: a stable counting sort of the
routed (token, k) entries by expert id, and the grouped GEMM's row-tile table beside it.

Expert ids are small integers, so a counting sort does what a stable sort by id does: each program counts the ids of
its chunk of entries (count_chunks); one program turns the counts into each expert's span bounds and each chunk's
first place in its experts' spans, and lists the row tiles (scan_chunks); each program then places its chunk's
entries, in entry order within an expert (place_chunks). Entry order within an expert is what the stable sort gives,
so the plan is the same, entry for entry (engine.experts.routing.dispatch.plan_on_device keeps the torch ops as the
reference).

Shapes: M = T*K entries, E experts of the layer, P chunks of CH entries. Imported only where Triton is installed."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def count_chunks(ids_ptr, counts_ptr, M, CH: tl.constexpr, BE: tl.constexpr):
    """counts[p, e] = the entries of chunk p (entries p*CH .. p*CH+CH-1) routed to expert e."""
    p = tl.program_id(0)
    i = p * CH + tl.arange(0, CH)
    ids = tl.load(ids_ptr + i, mask=i < M, other=-1)
    e = tl.arange(0, BE)
    hit = (ids[:, None] == e[None, :]).to(tl.int32)  # [CH, BE]
    tl.store(counts_ptr + p * BE + e, tl.sum(hit, axis=0))


@triton.jit
def scan_chunks(counts_ptr, offsets_ptr, bounds_ptr, tiles_ptr, P, E, max_tiles, BE: tl.constexpr,
                BP: tl.constexpr, BM: tl.constexpr, BT: tl.constexpr, TILES: tl.constexpr):
    """From counts [P, BE]: bounds [E + 1] (expert e owns grouped entries bounds[e]:bounds[e+1]), offsets [P, BE]
    (where chunk p's first entry of expert e goes) and, with TILES, the BM-row tiles [max_tiles, 4] (list_tiles).
    One program."""
    e = tl.arange(0, BE)
    e_ok = e < E
    total = tl.zeros([BE], tl.int32)
    for p0 in range(0, P, BP):
        p = p0 + tl.arange(0, BP)
        total += tl.sum(tl.load(counts_ptr + p[:, None] * BE + e[None, :], mask=(p < P)[:, None], other=0), axis=0)
    start = tl.cumsum(total, 0) - total  # [BE] exclusive
    tl.store(bounds_ptr + e, start.to(tl.int64), mask=e_ok)
    tl.store(bounds_ptr + E, tl.sum(total, axis=0).to(tl.int64))
    running = start
    for p0 in range(0, P, BP):
        p = p0 + tl.arange(0, BP)
        rows = p[:, None] * BE + e[None, :]
        c = tl.load(counts_ptr + rows, mask=(p < P)[:, None], other=0)  # [BP, BE]
        tl.store(offsets_ptr + rows, running[None, :] + tl.cumsum(c, 0) - c, mask=(p < P)[:, None])
        running += tl.sum(c, axis=0)
    if TILES:
        list_tiles(tiles_ptr, start, start + total, e, e_ok, E, max_tiles, BM, BT)


@triton.jit
def list_tiles(tiles_ptr, lo, hi, e, e_ok, E, max_tiles, BM: tl.constexpr, BT: tl.constexpr):
    """The BM-row tiles [max_tiles, 4] int32 of experts e [BE] (e_ok: e < E) whose grouped rows are lo:hi [BE]:
    (slot row = expert id, expert id, first row, end of the span) for each expert in ascending id, as
    engine.quant.grouped_gemm.row_tiles lists them on the host, then empty entries (0, 0, 0, 0)."""
    count = tl.where(e_ok, (hi - lo + BM - 1) // BM, 0)  # [BE] tiles of each expert
    last = tl.cumsum(count, 0)  # [BE] one past each expert's last tile
    for t0 in range(0, max_tiles, BT):
        j = t0 + tl.arange(0, BT)  # [BT] tile numbers
        owner = tl.sum((last[None, :] <= j[:, None]).to(tl.int32), axis=1)  # [BT] experts whose tiles end by j
        mine = (e[None, :] == owner[:, None]) & e_ok[None, :]  # [BT, BE]
        first_tile = tl.sum(tl.where(mine, (last - count)[None, :], 0), axis=1)
        first_row = tl.sum(tl.where(mine, lo[None, :], 0), axis=1) + (j - first_tile) * BM
        end = tl.sum(tl.where(mine, hi[None, :], 0), axis=1)
        live = owner < E
        row = tiles_ptr + j.to(tl.int64) * 4
        ok = j < max_tiles
        tl.store(row, tl.where(live, owner, 0).to(tl.int32), mask=ok)
        tl.store(row + 1, tl.where(live, owner, 0).to(tl.int32), mask=ok)
        tl.store(row + 2, tl.where(live, first_row, 0).to(tl.int32), mask=ok)
        tl.store(row + 3, tl.where(live, end, 0).to(tl.int32), mask=ok)


@triton.jit
def tile_table(bounds_ptr, tiles_ptr, E, max_tiles, BM: tl.constexpr, BE: tl.constexpr, BT: tl.constexpr):
    """list_tiles from bounds [E + 1] (expert e owns grouped rows bounds[e]:bounds[e+1]): the tiles of a plan made
    without them (the torch plan, or another tile height than the plan's). One program."""
    e = tl.arange(0, BE)
    e_ok = e < E
    lo = tl.load(bounds_ptr + e, mask=e_ok, other=0)
    hi = tl.load(bounds_ptr + e + 1, mask=e_ok, other=0)
    list_tiles(tiles_ptr, lo, hi, e, e_ok, E, max_tiles, BM, BT)


@triton.jit
def place_chunks(ids_ptr, weights_ptr, offsets_ptr, tokens_ptr, grouped_weights_ptr, position_ptr, M, K,
                 CH: tl.constexpr, BE: tl.constexpr):
    """Chunk p's entries at their places: position[i] = offsets[p, e] + (entries of expert e before i in the
    chunk), and the grouped entry there gets entry i's token row (i // K) and routing weight."""
    p = tl.program_id(0)
    i = p * CH + tl.arange(0, CH)
    ok = i < M
    ids = tl.load(ids_ptr + i, mask=ok, other=-1)
    e = tl.arange(0, BE)
    hit = ids[:, None] == e[None, :]  # [CH, BE]
    before = tl.cumsum(hit.to(tl.int32), 0) - 1  # [CH, BE] earlier entries of the chunk with the same id
    base = tl.load(offsets_ptr + p * BE + e)  # [BE]
    place = tl.sum(tl.where(hit, before + base[None, :], 0), axis=1).to(tl.int64)  # [CH]
    tl.store(position_ptr + i, place, mask=ok)
    tl.store(tokens_ptr + place, (i // K).to(tl.int64), mask=ok)
    tl.store(grouped_weights_ptr + place, tl.load(weights_ptr + i, mask=ok), mask=ok)


def most_tiles(rows: int, num_experts: int, tile_rows: int) -> int:
    """The most row tiles `rows` grouped entries can take: ceil(rows / tile_rows) + one partial tile per expert. A
    table of that size, and the grouped launches' grid, need nothing from the host; programs of empty tiles return
    at once."""
    return -(-rows // tile_rows) + min(num_experts, rows)


def experts_block(num_experts: int) -> int:
    return max(16, triton.next_power_of_2(num_experts))


def table_of_tiles(bounds: torch.Tensor, rows: int, num_experts: int, tile_rows: int) -> torch.Tensor:
    """The tile_rows-row tiles [most_tiles, 4] int32 of the experts whose grouped entries bounds [E + 1] gives."""
    most = most_tiles(rows, num_experts, tile_rows)
    tiles = torch.empty(most, 4, dtype=torch.int32, device=bounds.device)
    tile_table[(1,)](bounds, tiles, num_experts, most, BM=tile_rows, BE=experts_block(num_experts), BT=64)
    return tiles


def chunk_size(num_experts: int) -> int:
    """Entries a program counts and places: its [CH, BE] comparison stays at ~8k values."""
    return max(16, min(128, 8192 // triton.next_power_of_2(num_experts)))


def plan(ids: torch.Tensor, weights: torch.Tensor, num_experts: int, tile_rows: int | None = None):
    """ids [T, K], weights [T, K] -> (tokens [M] int64, grouped weights [M], position [T, K] int64, bounds [E + 1]
    int64, tiles [ceil(M / tile_rows) + min(E, M), 4] int32 or None): the stable sort's plan
    (engine.experts.routing.dispatch.plan_on_device) and, given tile_rows, the grouped GEMM's row tiles."""
    T, K = ids.shape
    M, device = T * K, ids.device
    be = experts_block(num_experts)
    ch = chunk_size(num_experts)
    chunks = triton.cdiv(M, ch)
    flat_ids, flat_weights = ids.reshape(-1).contiguous(), weights.reshape(-1).contiguous()
    counts = torch.empty(chunks, be, dtype=torch.int32, device=device)
    offsets = torch.empty_like(counts)
    bounds = torch.empty(num_experts + 1, dtype=torch.int64, device=device)
    most = most_tiles(M, num_experts, tile_rows) if tile_rows else 1
    tiles = torch.empty(most, 4, dtype=torch.int32, device=device)
    tokens = torch.empty(M, dtype=torch.int64, device=device)
    position = torch.empty(M, dtype=torch.int64, device=device)
    grouped_weights = torch.empty_like(flat_weights)
    count_chunks[(chunks,)](flat_ids, counts, M, CH=ch, BE=be, num_warps=4)
    scan_chunks[(1,)](counts, offsets, bounds, tiles, chunks, num_experts, most, BE=be, BP=16, BM=tile_rows or 1,
                      BT=64, TILES=bool(tile_rows), num_warps=4)
    place_chunks[(chunks,)](flat_ids, flat_weights, offsets, tokens, grouped_weights, position, M, K, CH=ch, BE=be,
                            num_warps=4)
    return tokens, grouped_weights, position.view(T, K), bounds, tiles if tile_rows else None
