"""A routing trace's expert use counts per MoE layer: how the host tier ranks which experts to pin first."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from engine.traces.format import TraceFormatError, load


def trace_use_counts(path: str | Path, layers: list[int], num_experts: int) -> dict[int, list[int]]:
    """{MoE layer: routing slots each expert received in the trace}; the trace's layers are the model's MoE layers
    in order. Refuses a trace of another topology in one line."""
    trace = load(Path(path))
    header = trace.header
    if (header.num_layers, header.num_experts) != (len(layers), num_experts):
        raise TraceFormatError(f"{path}: the trace has {header.num_layers} MoE layers x {header.num_experts} experts, "
                               f"the model {len(layers)} x {num_experts}; record one of this model with `wisp trace`")
    return {layer: np.bincount(trace.expert_ids[:, position, :].reshape(-1), minlength=num_experts).tolist()
            for position, layer in enumerate(layers)}
