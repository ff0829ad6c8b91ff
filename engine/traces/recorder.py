"""Turn per-step router outputs into a Trace. Used by `wisp trace record` (transformers) and
meant for the engine's routing hook: call ``record_step`` once per forward pass with each
layer's top-k ids. Not thread-safe: call it from the thread that runs the model."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.traces.format import Trace, TraceFormatError, TraceHeader, ids_dtype


def topk_from_router_logits(logits: np.ndarray, top_k: int) -> np.ndarray:
    """Top-k expert ids in router order (highest first) from router logits [T, E] -> [T, K].
    Softmax is monotonic, so the top-k of the logits is the top-k of the probabilities."""
    return np.argsort(-logits, axis=-1, kind="stable")[:, :top_k]


class TraceRecorder:
    def __init__(self, header: TraceHeader):
        self.header = header
        self._rows: list[np.ndarray] = []  # each [T, L, K]
        self._seq_ids: list[np.ndarray] = []
        self._is_prefill: list[bool] = []

    def record_step(self, layer_topk: list[np.ndarray], is_prefill: bool,
                    seq_ids: Sequence[int] | None = None) -> None:
        """One forward pass: ``layer_topk[l]`` is layer l's [T, top_k] expert ids; ``seq_ids``
        names the request of each of the T rows (default: all rows belong to request 0)."""
        if len(layer_topk) != self.header.num_layers:
            raise TraceFormatError(f"got {len(layer_topk)} layers, the trace has {self.header.num_layers}")
        rows = np.stack([np.asarray(ids).reshape(-1, self.header.top_k) for ids in layer_topk], axis=1)
        num_tokens = rows.shape[0]
        seq = np.zeros(num_tokens, np.int32) if seq_ids is None else np.asarray(seq_ids, np.int32)
        if seq.shape != (num_tokens,):
            raise TraceFormatError(f"{seq.size} seq_ids for {num_tokens} tokens")
        self._rows.append(rows.astype(ids_dtype(self.header.num_experts)))  # [T, L, K]
        self._seq_ids.append(seq)
        self._is_prefill.append(bool(is_prefill))

    def to_trace(self) -> Trace:
        empty = np.zeros((0, self.header.num_layers, self.header.top_k), ids_dtype(self.header.num_experts))
        return Trace(
            header=self.header,
            is_prefill=np.array(self._is_prefill, dtype=bool),
            num_tokens=np.array([r.shape[0] for r in self._rows], dtype=np.int32),
            expert_ids=np.concatenate(self._rows) if self._rows else empty,
            seq_ids=np.concatenate(self._seq_ids) if self._seq_ids else np.zeros(0, np.int32),
        )
