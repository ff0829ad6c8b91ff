"""The routing-trace file format (version 1): one compressed numpy ``.npz`` per trace.

Arrays in the file:
- ``header``: UTF-8 JSON bytes (uint8 array) with ``format`` ("wisp-trace"), ``version`` (1),
  ``model`` (e.g. "Qwen3-30B-A3B" for a twin of that topology), ``model_type``,
  ``num_layers``, ``num_experts``, ``top_k``, ``workload`` (e.g. "code", "chat",
  "multi_turn", "batched") and ``notes`` (free-form dict: how it was recorded);
- ``is_prefill``: bool ``[S]``, one per engine step (a forward pass);
- ``num_tokens``: int32 ``[S]``, the tokens that step routed (prompt tokens of all sequences
  in a prefill step, one per running sequence in a decode step);
- ``expert_ids``: uint8 (uint16 when num_experts > 256) ``[N, L, K]``, N = sum(num_tokens):
  the rows of all steps concatenated in step order; row r of step s is token r of that step,
  ``[l, :]`` its top-k expert ids at layer l in router order (highest weight first);
- ``seq_ids``: int32 ``[N]``, the request each row belongs to (rows of one request appear in
  token order), so token-to-token statistics never pair tokens of different requests.

The step structure is what the pager sees: per layer it loads unique(expert_ids of the step).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from engine.errors import WispError

FORMAT_NAME = "wisp-trace"
FORMAT_VERSION = 1


class TraceFormatError(WispError):
    """A trace file is missing, unreadable or inconsistent."""


@dataclasses.dataclass(frozen=True)
class TraceHeader:
    model: str
    model_type: str
    num_layers: int
    num_experts: int
    top_k: int
    workload: str
    notes: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Trace:
    header: TraceHeader
    is_prefill: np.ndarray  # [S] bool
    num_tokens: np.ndarray  # [S] int32
    expert_ids: np.ndarray  # [N, L, K]
    seq_ids: np.ndarray  # [N] int32

    @property
    def num_steps(self) -> int:
        return int(self.num_tokens.size)

    @property
    def step_offsets(self) -> np.ndarray:
        return np.concatenate(([0], np.cumsum(self.num_tokens)))  # [S+1]

    def step_rows(self, step: int) -> np.ndarray:
        offsets = self.step_offsets
        return self.expert_ids[offsets[step]: offsets[step + 1]]  # [T, L, K]

    def row_is_prefill(self) -> np.ndarray:
        return np.repeat(self.is_prefill, self.num_tokens)  # [N]


def ids_dtype(num_experts: int) -> type:
    return np.uint8 if num_experts <= 256 else np.uint16


def validate(trace: Trace) -> None:
    h = trace.header
    rows = int(trace.num_tokens.sum())
    if trace.expert_ids.shape != (rows, h.num_layers, h.top_k):
        raise TraceFormatError(f"expert_ids has shape {trace.expert_ids.shape}, header and num_tokens "
                               f"say ({rows}, {h.num_layers}, {h.top_k})")
    if trace.is_prefill.shape != trace.num_tokens.shape or trace.seq_ids.shape != (rows,):
        raise TraceFormatError("is_prefill, num_tokens and seq_ids lengths disagree")
    if rows and int(trace.expert_ids.max()) >= h.num_experts:
        raise TraceFormatError(f"an expert id is >= num_experts ({h.num_experts})")


def save(trace: Trace, path: Path) -> None:
    validate(trace)
    header = dataclasses.asdict(trace.header) | {"format": FORMAT_NAME, "version": FORMAT_VERSION}
    with open(path, "wb") as f:  # a file object keeps numpy from appending ".npz" to the name
        np.savez_compressed(
            f,
            header=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
            is_prefill=trace.is_prefill.astype(bool),
            num_tokens=trace.num_tokens.astype(np.int32),
            expert_ids=trace.expert_ids.astype(ids_dtype(trace.header.num_experts)),
            seq_ids=trace.seq_ids.astype(np.int32),
        )


def load(path: Path) -> Trace:
    try:
        with np.load(path) as data:
            header = json.loads(data["header"].tobytes().decode())
            arrays = {k: data[k] for k in ("is_prefill", "num_tokens", "expert_ids", "seq_ids")}
    except (OSError, KeyError, ValueError) as error:
        raise TraceFormatError(f"{path}: not a readable {FORMAT_NAME} file ({error})") from error
    if header.pop("format", None) != FORMAT_NAME or header.pop("version", None) != FORMAT_VERSION:
        raise TraceFormatError(f"{path}: not a {FORMAT_NAME} version {FORMAT_VERSION} file")
    trace = Trace(TraceHeader(**header), **arrays)
    validate(trace)
    return trace
