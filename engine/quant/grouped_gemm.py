"""The grouped MoE GEMM of large steps: a group of experts of one layer-step in two launches (gate_up with the
activation, then down with the routing weight), reading each expert's weights from its row of a slot table in
the row's own types (engine.quant.grouped_kernels). Every provider passes its own table (resident blocks, a
layer copied whole, the pager's slot pool) and the row of each expert in it, so one kernel serves them all.

The (token, k) entries come grouped by expert as engine.experts.routing.dispatch plans them; each expert's span is cut
into tiles of BM rows. A tile's result depends only on its rows and its expert's weights, never on the tiles
beside it: computing a layer's experts all at once (resident) or group by group as the pager fetches them gives
the same bits. The tile configuration may follow the step's size (its grouped entries, configuration()), never
where the experts live or how they are grouped, so every provider launches the same tiles for the same step.

Shapes: M grouped entries (T*K), D hidden size, I expert intermediate size, U experts of the group."""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

from engine.experts.formats.activation import SILU_GLU, ClampedSwiGlu, ExpertBias
from engine.experts.routing.dispatch import Dispatch, to_device
from engine.quant.linear import QuantLinearSpec
from engine.quant.types import BF16, F16, F32
from engine.system.triton_support import HAS_TRITON

# The tile configuration, one for every step. Taller row tiles dequantize each expert's weights fewer times: 128
# rows ran a Q4_K_M layer-step 1.3-2.5x faster than 64 on the H200 (bench/results/2026-12-02-prefill-2/NOTES.md). They
# had taken 0.3-0.7 GiB of device memory per prompt step: the down kernel's three stages did not fit, every launch
# failed first, and each caught error's traceback held that launch's tensors until a garbage collection
# (bench/results/2026-12-02-prefill-3/NOTES.md). Its stages are now its own (DOWN_STAGES), and launch() remembers
# what fits wherever a configuration still outgrows a GPU.
BM = 128  # grouped rows per tile
BN_GATE_UP = 32  # gate columns per program (and as many up columns): two [32, 256] weight tiles per K step
BN_DOWN = 64
NUM_WARPS = 8
NUM_STAGES = 3  # Triton's default: the x (or h) tiles of the next K steps load while this one multiplies
# The down kernel's: three stages of 128-row tiles would take 295,424 B of the H200's 232,448; one stage is what its
# 128-row rows were measured with (two fit too, untimed until bench/results/2026-12-02-prefill-3).
DOWN_STAGES = 1
SMALL_TILES = (64, 32, 64, 8, 3, 3, 0)  # the configuration (see configuration()) where the chosen one does not fit
# (most grouped entries of a step, its configuration): the first whose bound holds a step's entries, else the
# module's above. SWAP (the last value) computes each tile transposed (grouped_kernels.mma).
PROMPT_TILES: tuple[tuple[int, tuple[int, ...]], ...] = ()
FP32_STAGES = 1  # fp32 operands: one buffer of each tile (Triton's default three outgrow shared memory)
DENSE_TYPES = {torch.bfloat16: BF16, torch.float16: F16, torch.float32: F32}
WORD_TILES = True  # Q4_K and Q6_K tiles from 32-bit loads where the table is word-aligned (grouped_tiles)
# A sweep's configuration, "BM,BN_GATE_UP,BN_DOWN,NUM_WARPS,NUM_STAGES[,DOWN_STAGES[,SWAP]]" (set by the bench's
# probes through sweep_tiles, and by tests); None: the tables above.
TILES: str | None = None
# Mean grouped rows per expert above which each expert's own GEMM (dequantized once) is faster: every row tile
# dequantizes its expert's weights again. H200 (bench/results/2026-12-02-prefill and -prefill-2): gpt-oss-20b's 1024
# rows per expert took 43.6 ms grouped (64-row tiles) against 16.5 ms per expert; Qwen3's 512 took 4.9 ms grouped
# (128-row tiles) against 39.6 ms. Between the two, so that a Qwen3 prompt of 8192 tokens, whose layers use 118-125
# of their 128 experts (up to 555 rows each), stays grouped.
MAX_ROWS_PER_EXPERT = 768


def runs_grouped(device: torch.device, activation, dispatch: Dispatch | None = None) -> bool:
    """Large steps on this device run the grouped kernels: CUDA with Triton, an activation they fuse, and (given
    the step's dispatch) at most MAX_ROWS_PER_EXPERT rows per expert on average (fits). The choice depends on the
    step's routing and the layer's shape alone, never on where the experts live, so every provider makes the same
    one."""
    return (HAS_TRITON and device.type == "cuda"
            and (activation is SILU_GLU or isinstance(activation, ClampedSwiGlu))
            and (dispatch is None or fits(dispatch.tokens.numel(), dispatch.num_experts or dispatch.experts.size)))


def fits(entries: int, num_experts: int) -> bool:
    """A step of `entries` (token, k) rows over a layer of num_experts experts runs grouped (MAX_ROWS_PER_EXPERT)."""
    return entries <= MAX_ROWS_PER_EXPERT * num_experts


@dataclass(frozen=True)
class GroupedExpert:
    """Where an expert's three matrices sit in its slot row (bytes), and what runs between and after them."""

    gate: QuantLinearSpec  # [I, D]
    up: QuantLinearSpec  # [I, D]
    down: QuantLinearSpec  # [D, I]
    slot_bytes: int
    activation: object = SILU_GLU
    bias: ExpertBias | None = None

    @classmethod
    def dense(cls, hidden: int, intermediate: int, dtype: torch.dtype, activation=SILU_GLU,
              bias: ExpertBias | None = None) -> "GroupedExpert":
        """A dense block [gate (I*D) | up (I*D) | down (D*I)] of dtype."""
        qtype, size = DENSE_TYPES[dtype], hidden * intermediate * torch.empty((), dtype=dtype).element_size()
        return cls(QuantLinearSpec(qtype, intermediate, hidden, 0), QuantLinearSpec(qtype, intermediate, hidden, size),
                   QuantLinearSpec(qtype, hidden, intermediate, 2 * size), 3 * size, activation, bias)

    @staticmethod
    def fits(entries: int, num_experts: int) -> bool:
        """fits(): the step runs grouped. A method, so that engine.experts reaches the kernels only through the
        GroupedExpert a layout gives it."""
        return fits(entries, num_experts)

    @staticmethod
    def tile_rows(entries: int) -> int:
        """The rows of a row tile in a step of `entries` grouped entries (configuration()), so that a device plan
        can list the tiles."""
        return configuration(entries)[0]

    def run_table(self, table: torch.Tensor, dispatch: Dispatch, out: torch.Tensor) -> tuple:
        """run_grouped_table() of this expert format."""
        return run_grouped_table(self, table, dispatch, out)


def row_tiles(dispatch: Dispatch, units: np.ndarray, slots: np.ndarray, device, bm: int = BM) -> torch.Tensor:
    """The BM-row tiles of experts `units` (indices into dispatch.experts) whose blocks are rows `slots` of the
    table -> int32 [tiles, 4]: slot row, expert id, first grouped row, end of the expert's span."""
    starts, ends = dispatch.bounds[units], dispatch.bounds[units + 1]
    counts = -(-(ends - starts) // bm)
    unit = np.repeat(np.arange(units.size), counts)  # [tiles]
    within = np.arange(unit.size) - np.repeat(np.cumsum(counts) - counts, counts)
    tiles = np.stack([slots[unit], dispatch.experts[units][unit], starts[unit] + within * bm, ends[unit]], axis=1)
    return to_device(tiles.astype(np.int32), torch.device(device))


def device_row_tiles(dispatch: Dispatch, bm: int = BM) -> torch.Tensor:
    """The BM-row tiles of every expert of a device-planned dispatch whose blocks are the table's rows by expert
    id -> int32 [most tiles, 4] (engine.experts.routing.device_plan.most_tiles), the same tiles row_tiles lists for
    them, then empty ones: the plan's own table where it listed this tile height, else one listed from its bounds."""
    from engine.experts.routing.device_plan import table_of_tiles

    if dispatch.tiles is not None and dispatch.tile_rows == bm:  # listed by the plan's own kernels
        return dispatch.tiles
    return table_of_tiles(dispatch.expert_bounds, dispatch.tokens.numel(), dispatch.num_experts, bm)


def configuration(entries: int | None = None) -> tuple[int, ...]:
    """(BM, BN_GATE_UP, BN_DOWN, NUM_WARPS, NUM_STAGES, DOWN_STAGES, SWAP) for a step of `entries` grouped (token, k)
    rows: TILES's (the probe's sweep, tests; without DOWN_STAGES both kernels take NUM_STAGES, without
    SWAP the tiles are not swapped), else the first of PROMPT_TILES whose bound holds the step's entries, else the
    module's. The choice reads the step's size alone, never where its experts live, so resident, static and paged
    layers launch the same tiles. None of them changes a row's K order; BM also picks the tensor-core instruction
    (Hopper's wgmma from 64 rows, mma below; SWAP: from 64 weight rows)."""
    given = TILES
    if not given:
        for bound, tiles in PROMPT_TILES:
            if entries is not None and entries <= bound:
                return tiles
        return BM, BN_GATE_UP, BN_DOWN, NUM_WARPS, NUM_STAGES, DOWN_STAGES, 0
    values = tuple(int(v) for v in given.split(","))
    if len(values) not in (5, 6, 7):
        raise ValueError(f"tiles {given!r}: give BM,BN_GATE_UP,BN_DOWN,NUM_WARPS,NUM_STAGES[,DOWN_STAGES[,SWAP]], "
                         "e.g. 64,32,64,8,3")
    return values if len(values) == 7 else values + (values[4],) * (6 - len(values)) + (0,)


@contextmanager
def sweep_tiles(tiles: str | None):
    """Inside the block, large steps take this configuration (configuration()'s text; None: the tables): a bench
    sweep's parameter. Restores the previous one after."""
    global TILES
    before, TILES = TILES, tiles
    try:
        yield
    finally:
        TILES = before


def word_aligned(table: torch.Tensor, *matrices: QuantLinearSpec) -> bool:
    """Every slot row and matrix of the table starts on a 4-byte boundary: what the word-wide tiles need."""
    starts = [table.data_ptr(), table.stride(0)] + [m.byte_offset for m in matrices]
    return all(start % 4 == 0 for start in starts)


FITTED: dict[tuple, dict | None] = {}  # (kernel, options asked) -> the options it launched with; None: none fit


def launch(kernel, grid, *args, **options):
    """kernel[grid](*args); where its pipeline stages outgrow the GPU's shared memory (consumer cards have ~99 KB a
    block, the H200 227 KB) it runs with one stage fewer until they fit, and where a Triton build cannot compile the
    word-wide tiles, with byte tiles: the same arithmetic in the same order either way, so the same bits. What fits
    (or that nothing does) is remembered per kernel and options, so a launch fails at most once per process: a
    caught launch error keeps the launch's arguments alive through its traceback until a garbage collection
    (Triton keeps the error of a kernel that does not fit), and a prompt step launches these kernels every layer."""
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import OutOfResources

    key = (kernel, tuple(sorted(options.items())))
    if key in FITTED and FITTED[key] is None:
        raise OutOfResources(0, 0, "shared memory (remembered)")
    options = FITTED.get(key, options)
    while True:
        try:
            launched = kernel[grid](*args, **options)
        except OutOfResources as err:
            if options.get("num_stages", 1) <= 1:
                FITTED[key] = None
                raise
            err.__traceback__ = None  # retried: its frames (this launch's tensors) need not outlive it
            options = {**options, "num_stages": options["num_stages"] - 1}
            continue
        except (CompilationError, RuntimeError) as err:  # RuntimeError: a pass that failed inside the compiler
            if not options.get("WORDS"):
                raise
            err.__traceback__ = None
            warnings.warn(f"grouped MoE GEMM: word-wide tiles did not compile here, reading bytes ({err})",
                          stacklevel=2)
            options = {**options, "WORDS": False}
            continue
        FITTED[key] = options
        return launched


def run_grouped(expert: GroupedExpert, table: torch.Tensor, dispatch: Dispatch, units, slots,
                out: torch.Tensor) -> tuple:
    """Experts `units` of a host-planned dispatch, whose blocks are rows `slots` of table [R, numel] (any dtype),
    computed in place in their spans of out [M, D] (their token rows on entry, their weighted outputs on return).
    -> the two launched kernels (their metadata holds shared memory and registers), () for no experts."""
    units = np.asarray(units, dtype=np.int64)
    if units.size == 0:
        return ()
    slots = np.asarray(slots, dtype=np.int64)
    return launch_configured(expert, table, dispatch, out, lambda bm: row_tiles(dispatch, units, slots, out.device, bm))


def run_grouped_table(expert: GroupedExpert, table: torch.Tensor, dispatch: Dispatch, out: torch.Tensor) -> tuple:
    """Every expert of a device-planned dispatch (engine.experts.routing.dispatch.plan_on_device), its block row
    `expert id` of table [E, numel], computed in place in its span of out [M, D]: no host sync. The same tiles, so
    the same bits, as run_grouped over the same experts."""
    return launch_configured(expert, table, dispatch, out, lambda bm: device_row_tiles(dispatch, bm))


def launch_configured(expert: GroupedExpert, table: torch.Tensor, dispatch: Dispatch, out: torch.Tensor,
                      tiles_for) -> tuple:
    """The two launches at the configured tiles (tiles_for(BM) -> the tile table). Where they outgrow the GPU's
    shared memory even in one stage (consumer cards have ~99 KB a block, about what one stage of 128-row bf16 tiles
    takes) the step runs SMALL_TILES instead: the same K order for every row."""
    from triton.runtime.errors import OutOfResources

    config = configuration(dispatch.tokens.numel())
    try:
        return launch_both(expert, table.view(torch.uint8), dispatch, out, tiles_for(config[0]), config)
    except OutOfResources as err:
        if config[0] <= SMALL_TILES[0]:
            raise
        err.__traceback__ = None  # see launch
        return launch_both(expert, table.view(torch.uint8), dispatch, out, tiles_for(SMALL_TILES[0]), SMALL_TILES)


def launch_both(expert: GroupedExpert, table: torch.Tensor, dispatch: Dispatch, out: torch.Tensor,
                tiles: torch.Tensor, config: tuple[int, ...]) -> tuple:
    """The two launches over the row tiles `tiles` [n, 4] at one tile configuration; table [R, slot bytes] uint8."""
    from engine.quant.grouped_kernels import grouped_down, grouped_gate_up
    from engine.quant.triton_kernels import TYPE_CODE, tile_shape

    bm, bn_gate_up, bn_down, warps, stages, down_stages, swap = config
    gate, up, down = expert.gate, expert.up, expert.down
    hidden, intermediate = down.out_features, down.in_features
    h = torch.empty(out.shape[0], intermediate, dtype=out.dtype, device=out.device)  # [M, I]
    clamped = isinstance(expert.activation, ClampedSwiGlu)
    ieee = out.dtype == torch.float32 or out.device.type != "cuda"  # the interpreter's 16-bit dot is wrong
    fp32 = out.dtype == torch.float32
    stages, down_stages = ({"num_stages": FP32_STAGES if fp32 else n} for n in (stages, down_stages))
    words = WORD_TILES and word_aligned(table, gate, up, down)
    bias = expert.bias
    (gate_g, gate_l), (up_g, up_l), (down_g, down_l) = (tile_shape(s.qtype) for s in (gate, up, down))
    first = launch(grouped_gate_up, (-(-intermediate // bn_gate_up), tiles.shape[0]),
        out, table, tiles, h, out if bias is None else bias.gate_up, table.shape[1], gate.byte_offset,
        up.byte_offset, gate.row_bytes, up.row_bytes, intermediate, hidden,
        expert.activation.alpha if clamped else 0.0, expert.activation.limit if clamped else 0.0,
        GATE_TYPE=TYPE_CODE[gate.qtype], UP_TYPE=TYPE_CODE[up.qtype], GATE_G=gate_g, GATE_L=gate_l, UP_G=up_g,
        UP_L=up_l, CLAMPED=clamped, HAS_BIAS=bias is not None, IEEE=ieee, WORDS=words, EVEN_K=hidden % 256 == 0, BM=bm,
        BN=bn_gate_up, SWAP=bool(swap), num_warps=warps, enable_fp_fusion=False, **stages)
    second = launch(grouped_down, (-(-hidden // bn_down), tiles.shape[0]),
        h, table, tiles, out, dispatch.weights, out if bias is None else bias.down, table.shape[1],
        down.byte_offset, down.row_bytes, hidden, intermediate, DOWN_TYPE=TYPE_CODE[down.qtype], G=down_g, L=down_l,
        HAS_BIAS=bias is not None, IEEE=ieee, WORDS=words, EVEN_K=intermediate % 256 == 0, BM=bm, BN=bn_down,
        SWAP=bool(swap), num_warps=warps, enable_fp_fusion=False, **down_stages)
    return first, second
