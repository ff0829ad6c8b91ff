"""GPU time of a decode step from its whole-step CUDA graphs, replayed back to back with nothing else between
them (no host work, no sampling): what `bench.profile_decode` reports per arm and `wisp bench` records
per row (`step_gpu_ms`), so a row's decode tok/s can be split into the GPU's part and the rest."""

from __future__ import annotations

import time
import warnings

import torch

REPLAYS = 100
EARLY_GRAPHS = 3  # a process's first CUDA graphs: they replay faster than every later one (see is_late_graph)


def is_late_graph(row: dict) -> bool:
    """Whether a `wisp bench` row decoded through a CUDA graph captured after its process's first EARLY_GRAPHS: such
    a step replays slower whatever the arm (bench/results/2026-11-30-graph-capture-order), so two rows compare only
    where both are early or both late. A row without the count (recorded before it was) is not known late."""
    return row.get("cuda_graphs_before", 0) >= EARLY_GRAPHS


def whole_step_graphs(engine, batch: int = 1):
    """The PaddedDecode of this batch size, if its step ran as whole-step graphs (else None)."""
    padded_decode = engine.runner.padded_decode
    static = padded_decode.by_batch.get(batch) if padded_decode is not None else None
    return static if static is not None and static.whole is not None else None


def replay_whole(static) -> None:
    for graph in static.whole:
        graph.replay()


def replay_ms(static) -> float:
    """GPU milliseconds of one decode step: its whole-step graphs replayed back to back."""
    replay_whole(static)
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(REPLAYS):
        replay_whole(static)
    torch.cuda.synchronize()
    return (time.perf_counter() - started) / REPLAYS * 1e3


def timed_launches(launch) -> float:
    """Host microseconds per launch() call on an idle GPU (the launch alone, not the work it queues)."""
    launch()
    total = 0.0
    for _ in range(REPLAYS):
        torch.cuda.synchronize()
        started = time.perf_counter()
        launch()
        total += time.perf_counter() - started
    torch.cuda.synchronize()
    return total / REPLAYS * 1e6


def step_gpu_ms(engine, batch: int) -> float | None:
    """After an arm's timed runs: GPU ms of its last decode step's graphs, or None where the step did not run as
    whole-step graphs. The replays redo that step: its KV write (the same values into the same slot) and its
    expert lookups, whose misses hit from the second replay on, so for a paged arm with misses this is the
    step with every expert resident. The engine must not serve again after it (its pager counters moved)."""
    static = whole_step_graphs(engine, batch)
    if static is None:
        return None
    try:
        return replay_ms(static)
    except RuntimeError as err:  # a benchmark's extra column: the arm's measured row is kept without it
        warnings.warn(f"step_gpu_ms: replaying the decode graphs failed ({err})", stacklevel=2)
        return None
