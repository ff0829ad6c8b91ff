"""Turns a scheduled batch into model inputs (flattened tokens, positions, KV slots) and runs the model with
the expert provider it owns."""

from __future__ import annotations

import numpy as np
import torch

from engine.kv.block_manager import BlockManager
from engine.model.attention import AttentionMetadata, KVCache, SeqSpan
from engine.model.state_chains import StateChains, unchained
from engine.experts.routing.dispatch import to_device
from engine.experts.provider import ExpertProvider
from engine.model.transformer import MoeContext, MoeTransformer, RoutingObserver, RoutingOverride
from engine.runtime.decode_graphs import DecodeGraphs
from engine.runtime.sequence import Sequence
from engine.system.triton_support import fused_step


def kv_slots(block_table: list[int], num_tokens: int, block_size: int) -> np.ndarray:
    """Flat cache slots of positions 0..num_tokens-1."""
    blocks = np.asarray(block_table, dtype=np.int64)[:, None] * block_size + np.arange(block_size)  # [nb, bs]
    return blocks.reshape(-1)[:num_tokens]


def rope_delta(seq: Sequence) -> int:
    """How far a position after a prompt with images is from its index (M-RoPE); 0 for text."""
    return 0 if seq.images is None else seq.images.rope_delta


class ModelRunner:
    def __init__(self, model: MoeTransformer, experts: ExpertProvider, cache: KVCache, block_manager: BlockManager,
                 device: torch.device, padded_decode: DecodeGraphs | None = None):
        self.model, self.experts, self.cache, self.block_manager = model, experts, cache, block_manager
        self.device = device
        self.padded_decode = padded_decode  # decode with static shapes (CUDA graphs on CUDA)
        self.step_hook = None  # (seqs, is_prefill) -> None before each forward; trace-driven benchmarks
        self.routing_observer: RoutingObserver | None = None
        self.routing_override: RoutingOverride | None = None  # trace-driven benchmarks
        # Positions the running step's sequences are ahead of their token_ids: 1 for a decode step launched before
        # the token it reads was read back (LLMEngine's overlapped steps), else 0. Step hooks read it.
        self.lookahead = 0
        # (seq, first position, final hidden states [n, D]) after every forward: the MTP drafter's input
        self.hidden_observer = None
        self.vision = None  # engine.vision.vision_model.VisionModel of a model that sees images

    def prepare(self, seqs: list[Sequence], is_prefill: bool):
        """-> (input ids [T], positions [T], metadata, the rows whose logits the step returns). A prefill returns
        each sequence's last row; a decode step its last token's row and one row per draft after it."""
        ids, positions, slot_lists, spans_host, logit_rows = [], [], [], [], []
        q_start = 0
        for seq in seqs:
            start = seq.prefill_start if is_prefill else len(seq.token_ids) - 1
            new_ids = seq.token_ids[start : seq.prefill_end] if is_prefill else seq.token_ids[start:] + seq.draft_ids
            num_tokens = start + len(new_ids)  # a prompt's chunk ends before its end
            slots = kv_slots(seq.block_table, num_tokens, self.block_manager.block_size)
            ids.extend(new_ids)
            positions.append(np.arange(start, num_tokens) + (0 if is_prefill else rope_delta(seq)))
            slot_lists.append(slots)
            spans_host.append((q_start, len(new_ids), num_tokens, seq.state_slot, bool(seq.draft_ids)))
            q_start += len(new_ids)
            logit_rows.extend(range(q_start - (1 if is_prefill else len(new_ids)), q_start))
        host = np.concatenate([np.asarray(ids, dtype=np.int64), *positions, *slot_lists])
        packed = to_device(host, self.device)  # one host->device copy per step, queued without a host sync
        T = len(ids)
        input_ids, pos = packed[:T], packed[T : 2 * T]
        spans, slot_mapping, offset = [], [], 2 * T
        for (start_row, q_len, num_tokens, state_slot, is_verify) in spans_host:
            seq_slots = packed[offset : offset + num_tokens]
            spans.append(SeqSpan(start_row, q_len, seq_slots, state_slot, is_verify))
            slot_mapping.append(seq_slots[num_tokens - q_len :])
            offset += num_tokens
        meta = AttentionMetadata(slot_mapping=torch.cat(slot_mapping), spans=spans)
        return input_ids, pos, meta, logit_rows

    @torch.inference_mode()
    def run(self, seqs: list[Sequence], is_prefill: bool, ahead: torch.Tensor | None = None) -> torch.Tensor:
        """-> fp32 logits [R, V] of each sequence's last position, and after it of each of its drafts. ahead [B]
        (decode steps with static shapes only): each sequence's next token as the previous step sampled it, still
        on the device: this step computes it at the position after token_ids' last, whose KV block the caller has
        reserved."""
        self.lookahead = 0 if ahead is None else 1
        self.experts.begin_step(is_prefill)
        if self.step_hook is not None:
            self.step_hook(seqs, is_prefill)
        context = MoeContext(self.experts, self.routing_observer, self.routing_override)
        if self.takes_padded(seqs, is_prefill):
            hidden = self.decode_padded(seqs, context, ahead)  # [R, D]
            if self.hidden_observer is not None:
                row = 0
                for seq in seqs:  # a copy: a graph's output buffer is rewritten by its next replay
                    num_rows = 1 + len(seq.draft_ids)
                    self.hidden_observer(seq, len(seq.token_ids) - 1 + self.lookahead,
                                         hidden[row : row + num_rows].clone())
                    row += num_rows
            return self.model.logits(hidden)
        if ahead is not None:
            raise ValueError("a step ahead of its sequences' tokens runs only as a decode step with static shapes")
        input_ids, positions, meta, logit_rows = self.prepare(seqs, is_prefill)
        images = None
        if is_prefill and self.vision is not None:
            mrope_positions, images = self.vision.step_inputs(seqs)
            positions = positions if mrope_positions is None else mrope_positions
            self.vision.mark_image_blocks(seqs, meta.spans)
        hidden = self.model(input_ids, positions, meta, self.cache, context, images)  # [T, D]
        if self.hidden_observer is not None:
            for seq, span in zip(seqs, meta.spans):
                first = span.kv_slots.numel() - span.q_len
                self.hidden_observer(seq, first, hidden[span.q_start : span.q_start + span.q_len])
        return self.model.logits(hidden[logit_rows])

    def takes_padded(self, seqs: list[Sequence], is_prefill: bool) -> bool:
        """Whether a step runs with static shapes (CUDA graphs on CUDA): a decode step, one row per position. A verify
        step's sequence takes one row for its last token and one per draft, each one position further into its
        context: every attention layer writes all rows' K and V before any row attends, so a draft's row sees the
        rows before it, and each row computes what a plain decode step at its position computes. A Gated DeltaNet
        layer steps a sequence's rows one after another (engine.model.state_chains), into the state cache's scratch
        rows, so a verify step of a hybrid model with those takes the static step while its drafts fit them; other
        state layers (short conv, Mamba: lfm2_moe, nemotron_h) verify on the dynamic path. On CUDA the graphs hold
        the fused step kernels, which read the chains on the device; without Triton a hybrid verifies eagerly."""
        if self.padded_decode is None or is_prefill:
            return False
        num_drafts = sum(len(seq.draft_ids) for seq in seqs)
        if num_drafts == 0:
            return True
        if len(seqs) + num_drafts > self.padded_decode.max_rows:
            return False
        if not self.model.args.is_hybrid:
            return True
        return self.cache.can_chain(num_drafts) and (self.device.type != "cuda" or fused_step())

    def decode_padded(self, seqs: list[Sequence], context: MoeContext, ahead: torch.Tensor | None = None
                      ) -> torch.Tensor:
        """Rows in step order: each sequence's last token (or, ahead, the token after it), then its drafts."""
        max_len, block_size = self.padded_decode.max_len, self.block_manager.block_size
        rows = [(seq, len(seq.token_ids) + self.lookahead + draft)
                for seq in seqs for draft in range(1 + len(seq.draft_ids))]  # (sequence, context length)
        kv_index = np.zeros((len(rows), max_len), dtype=np.int64)
        for row, (seq, length) in enumerate(rows):
            kv_index[row, :length] = kv_slots(seq.block_table, length, block_size)
        if ahead is None:
            input_ids = [token for seq in seqs for token in [seq.token_ids[-1], *seq.draft_ids]]
        else:
            input_ids = [0] * len(seqs)
        # after an image, M-RoPE's three position axes are equal at every decoded token: the rotary of one position
        offsets = [rope_delta(seq) for seq, _ in rows]
        return self.padded_decode.step(input_ids, [length for _, length in rows], kv_index, self.state_chains(seqs),
                                       context, device_ids=ahead, position_offsets=offsets if any(offsets) else None)

    def state_chains(self, seqs: list[Sequence]) -> StateChains:
        """Where each row reads and writes its sequence's states: a drafting sequence's rows chain through the
        state cache's scratch rows (HybridCache.chain, which keeps them for roll_back)."""
        if any(seq.draft_ids for seq in seqs) and self.model.args.is_hybrid:
            return self.cache.chain([(seq.state_slot, 1 + len(seq.draft_ids)) for seq in seqs])
        return unchained([seq.state_slot for seq in seqs for _ in range(1 + len(seq.draft_ids))])
