"""Decode steps with static shapes: the dense part of every layer (norms, attention over a context padded to
max_model_len, routing) reads and writes fixed buffers, so on CUDA the step runs as CUDA graph replays.

Where the expert provider has a graphed path (resident experts; the pager with its LRU on the device,
engine.experts.pager.device_pager), the whole step - every layer, routed experts and miss copies included - runs as
CUDA graphs replayed back to back: one graph per step unless WholeStepOptions.chunk_layers splits it (one graph
launches least; bench.profile_decode --chunk-layers compares). Otherwise each layer's dense part is one graph and the
experts run eagerly between replays. Every expert mode computes the same kernels in the same order, so outputs
stay bitwise equal."""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from engine.experts.provider import GraphedExperts
from engine.model.attention import KVCache, PaddedDecodeMetadata
from engine.model.state_chains import StateChains
from engine.model.transformer import MoeContext, MoeTransformer
from engine.quant.quant_modules import embedding_place

# the host->device copy's per-row fields: input id, position, KV slot, context length, state slot, and where the row
# reads, writes and chains its states (StateChains); each row's padded KV index follows them
PER_ROW = 8

_captured_graphs = [0]  # CUDA graphs captured in this process, by every engine's decode steps


def process_graph_captures() -> int:
    """CUDA graphs this process has captured for decode steps so far (every engine, every batch size, every
    re-capture). A graph captured after the process's first three replays slower, with any engine (the cause lies
    below torch: bench/results/2026-11-30-graph-capture-order), so benchmarks record this count beside each row."""
    return _captured_graphs[0]


@dataclass(frozen=True)
class WholeStepOptions:
    """How decode steps run through the providers' graphed path (the defaults are the engine's; benchmarks and
    tests set others with DecodeGraphs.set_whole_options)."""

    chunk_layers: int | None = None  # layers per captured graph; None: the whole step as one graph
    eager: bool = False  # also without CUDA graphs: the path runs eagerly (the CPU, under Triton's interpreter)


class PaddedDecode:
    """Buffers and per-layer graphs of one batch size."""

    def __init__(self, model: MoeTransformer, cache: KVCache, batch: int, max_len: int, use_graphs: bool,
                 whole_options: WholeStepOptions = WholeStepOptions()):
        args, (device, dtype) = model.args, embedding_place(model.embed_tokens)
        self.model, self.cache, self.batch, self.use_graphs = model, cache, batch, use_graphs
        self.whole_options = whole_options
        # Two host buffers, used in turn: a step launched before the last one's tokens are read (the engine's
        # overlapped steps) writes the other, so the copy still queued behind the GPU reads what it was given.
        self.hosts = [torch.zeros(batch * (PER_ROW + max_len), dtype=torch.long, pin_memory=device.type == "cuda")
                      for _ in range(2)]
        self.loads = 0
        self.packed = torch.zeros_like(self.hosts[0], device=device)
        rows = self.packed[: PER_ROW * batch].view(PER_ROW, batch)
        self.input_ids, self.positions = rows[0], rows[1]
        kv_index = self.packed[PER_ROW * batch :].view(batch, max_len)
        self.meta = PaddedDecodeMetadata(slot_mapping=rows[2], kv_index=kv_index, lengths=rows[3],
                                         state_slots=rows[4], state_sources=rows[5], state_targets=rows[6],
                                         chain_lengths=rows[7])
        self.x = [torch.zeros(batch, args.hidden_size, dtype=dtype, device=device)
                  for _ in range(args.num_hidden_layers + 1)]  # x[l]: input of layer l; x[L]: final
        # the rotary's (cos, sin) tables, as many and as wide as it gives
        self.rope = tuple(torch.zeros_like(table) for table in model.rotary(self.positions, dtype))
        self.graphs: list[torch.cuda.CUDAGraph] | None = None
        self.outputs: list = []
        self.whole: list[torch.cuda.CUDAGraph] | None = None  # the whole step's graphs, where the provider allows
        self.whole_out: torch.Tensor | None = None
        self.whole_generation = -1
        self.whole_steps = 0  # steps run through the whole-step path (captured or not)
        self.captures, self.capture_s = 0, 0.0  # graph captures (each after one eager step) and their wall time
        self.context: MoeContext | None = None  # this step's experts and routing hooks (the runner's)
        self.graphed_context: MoeContext | None = None  # the same with the provider's graphed path

    def load(self, input_ids: list[int], lengths: list[int], kv_index: np.ndarray, chains: StateChains,
             device_ids: torch.Tensor | None = None, position_offsets: list[int] | None = None) -> None:
        """This step's inputs, in one host->device copy. kv_index [B, max_len], padded with slot 0; chains: where
        each row reads and writes its sequence's linear-attention states (its slot, -1 where the model has none; a
        verify step's scratch rows). device_ids [B]: the input tokens as the last step sampled them on the device, in
        place of input_ids (a failed row's -1 reads token 0). position_offsets [B]: each row's rotary position less
        its index (M-RoPE after an image; None: 0)."""
        B = self.batch
        buffer = self.hosts[self.loads % 2]
        self.loads += 1
        host = buffer.numpy()
        rows = host[: PER_ROW * B].reshape(PER_ROW, B)
        rows[0], rows[1] = input_ids, np.asarray(lengths) - 1 + (0 if position_offsets is None
                                                                 else np.asarray(position_offsets))
        rows[2] = kv_index[np.arange(B), np.asarray(lengths) - 1]
        rows[3], rows[4] = lengths, chains.slots
        rows[5], rows[6], rows[7] = chains.sources, chains.targets, chains.lengths
        host[PER_ROW * B :] = kv_index.reshape(-1)
        self.meta.is_chained = chains.is_chained
        self.packed.copy_(buffer, non_blocking=True)
        if device_ids is not None:
            torch.clamp(device_ids, min=0, out=self.input_ids)

    def dense_part(self, layer: int):
        return self.model.layers[layer].dense_part(self.x[layer], self.rope, self.meta, self.cache, self.context)

    def run(self, context: MoeContext) -> torch.Tensor:
        """-> final hidden states [B, D] of this step. context.experts: the runner's ExpertProvider."""
        model, provider = self.model, context.experts
        top_k = model.args.num_experts_per_tok
        self.context = context
        whole = (self.use_graphs or self.whole_options.eager) and context.observer is None
        path = provider.graph_path(self.batch, top_k) if whole else None
        if path is not None:
            out = self.run_whole(path, top_k)
            if out is not None:
                return out
        self.x[0].copy_(model.embed(self.input_ids))
        for static, value in zip(self.rope, model.rotary(self.positions, self.x[0].dtype)):
            static.copy_(value)
        for index, layer in enumerate(model.layers):
            out = self.graph_output(index) if self.graphs else self.dense_part(index)
            if layer.is_moe:
                layer.finish(out, context, out=self.x[index + 1])
            elif not self.graphs:
                self.x[index + 1].copy_(out)
        if self.use_graphs and self.graphs is None:
            started = time.perf_counter()
            self.capture()  # after one eager pass: every buffer holds valid data, every kernel is warm
            self.captures, self.capture_s = self.captures + 1, self.capture_s + time.perf_counter() - started
        return model.norm(self.x[-1])

    def run_whole(self, path: GraphedExperts, top_k: int) -> torch.Tensor | None:
        """The step as its graphs (captured after one eager run); None if that path failed: the provider has
        then turned it off and the caller runs the step the per-layer way."""
        path.begin_step(self.batch, top_k)
        self.whole_steps += 1
        if self.whole is not None and self.whole_generation == path.generation:
            for graph in self.whole:
                graph.replay()
            return self.whole_out
        self.whole = None
        self.graphed_context = MoeContext(path, self.context.observer, self.context.override)
        try:
            started = time.perf_counter()
            out = self.whole_step()  # this step, eagerly: compiles and warms every kernel before the capture
            if self.use_graphs:
                pool, graphs = torch.cuda.graph_pool_handle(), []
                for start, end in self.chunks():  # replayed in capture order, so they may share one pool
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph, pool=pool):
                        last = self.whole_chunk(start, end)
                    graphs.append(graph)
                    _captured_graphs[0] += 1
                self.whole, self.whole_out, self.whole_generation = graphs, last, path.generation
                self.captures, self.capture_s = self.captures + 1, self.capture_s + time.perf_counter() - started
        except torch.cuda.OutOfMemoryError:
            raise
        except Exception as err:  # e.g. Triton cannot build the pager's kernels for this GPU
            path.cancel_step()
            warnings.warn(f"decoding without the one-graph step ({type(err).__name__}: {err}); using per-layer "
                          "graphs and the host pager, which is slower", stacklevel=2)
            return None
        return out

    def chunks(self) -> list[tuple[int, int]]:
        layers = len(self.model.layers)
        size = self.whole_options.chunk_layers or layers
        return [(start, min(start + size, layers)) for start in range(0, layers, size)]

    def whole_step(self) -> torch.Tensor:
        """One decode step through the providers' sync-free path, chunk by chunk (each chunk capturable)."""
        for start, end in self.chunks():
            out = self.whole_chunk(start, end)
        return out

    def whole_chunk(self, start: int, end: int) -> torch.Tensor | None:
        """Layers start..end-1 from x[start]: into x[end], or the final hidden states after the last layer."""
        model = self.model
        if start == 0:
            self.x[0].copy_(model.embed(self.input_ids))
            for static, value in zip(self.rope, model.rotary(self.positions, self.x[0].dtype)):
                static.copy_(value)
        x = self.x[start]
        for layer in model.layers[start:end]:
            out = layer.dense_part(x, self.rope, self.meta, self.cache, self.graphed_context)
            if layer.is_moe:
                x = layer.finish(out, self.graphed_context)
            else:
                x = out
        if end == len(model.layers):
            return model.norm(x)
        self.x[end].copy_(x)
        return None

    def graph_output(self, index: int):
        self.graphs[index].replay()
        return self.outputs[index]

    def warm_up(self) -> None:
        """Each layer's dense part once more before its capture, on the capture's side stream. A linear-attention
        layer is left out: its dense part advances its sequences' conv and recurrent states, so a second run would
        apply this step to them twice (attention layers write the same K and V again); the eager step before the
        capture has warmed its kernels."""
        for index, layer in enumerate(self.model.layers):
            if not getattr(layer, "is_linear", False):
                self.dense_part(index)

    def capture(self) -> None:
        pool = torch.cuda.graph_pool_handle()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.warm_up()
        torch.cuda.current_stream().wait_stream(side)
        graphs, outputs = [], []
        for index, layer in enumerate(self.model.layers):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                out = self.dense_part(index)
                if not layer.is_moe:
                    self.x[index + 1].copy_(out)
            graphs.append(graph)
            _captured_graphs[0] += 1
            outputs.append(out)
        self.graphs, self.outputs = graphs, outputs


class DecodeGraphs:
    """PaddedDecode per batch size (rows), created on first use; dropped when the KV cache is reallocated. max_rows:
    the most rows a step takes here (each size up to it holds [rows, max_len] buffers and its own graphs); a larger
    step runs on the dynamic path."""

    def __init__(self, model: MoeTransformer, cache: KVCache, max_len: int, use_graphs: bool, max_rows: int = 8):
        self.model, self.cache, self.max_len, self.use_graphs = model, cache, max_len, use_graphs
        self.max_rows = max_rows
        self.by_batch: dict[int, PaddedDecode] = {}
        self._dropped = (0, 0.0)  # captures and their seconds of the batch sizes' graphs dropped so far
        self.whole_options = WholeStepOptions()

    def set_whole_options(self, options: WholeStepOptions) -> None:
        """Run whole decode steps this way from the next step on (drops the graphs captured so far)."""
        self.invalidate()
        self.whole_options = options

    def invalidate(self) -> None:
        self._dropped = self.capture_totals()
        self.by_batch.clear()

    def capture_totals(self) -> tuple[int, float]:
        """(graph captures, their wall seconds incl. the eager step before each) since this engine started: the
        share of a re-split's cost that lands on the next decode step, not in its stall."""
        live = self.by_batch.values()
        return (self._dropped[0] + sum(s.captures for s in live), self._dropped[1] + sum(s.capture_s for s in live))

    def step(self, input_ids: list[int], lengths: list[int], kv_index: np.ndarray, chains: StateChains,
             context: MoeContext, device_ids: torch.Tensor | None = None,
             position_offsets: list[int] | None = None) -> torch.Tensor:
        batch = len(input_ids)
        if batch not in self.by_batch:
            self.by_batch[batch] = PaddedDecode(self.model, self.cache, batch, self.max_len, self.use_graphs,
                                                self.whole_options)
        static = self.by_batch[batch]
        static.load(input_ids, lengths, kv_index, chains, device_ids, position_offsets)
        return static.run(context)
