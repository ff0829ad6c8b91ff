"""Model and training presets: the demo model, the three topology twins, and a CPU toy size.

A twin keeps the expert topology of a published model (layers, experts, top-k, router
normalisation, q/k norm style) with a tiny hidden size; only its routing traces are shipped.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ArchSpec:
    model_type: str  # "qwen3_moe" | "olmoe" | "mixtral": the HF format written
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    num_experts: int
    top_k: int
    moe_intermediate_size: int
    norm_topk_prob: bool
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 2048

    @property
    def qk_norm(self) -> str:
        """Where q/k RMSNorm applies: per head (Qwen3), over the whole projection (OLMoE), none."""
        return {"qwen3_moe": "head", "olmoe": "full", "mixtral": "none"}[self.model_type]


@dataclasses.dataclass(frozen=True)
class TrainSpec:
    seq_len: int = 512
    batch_size: int = 64
    max_steps: int = 20000
    time_budget_s: float = 280.0
    lr: float = 2e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 100
    weight_decay: float = 0.1
    aux_loss_coef: float = 0.01
    grad_clip: float = 1.0
    eval_every: int = 250
    eval_batches: int = 8
    seed: int = 0
    is_checkpointed: bool = False  # activation checkpointing per layer (the 48-layer twin needs it)


@dataclasses.dataclass(frozen=True)
class Preset:
    name: str
    model_name: str  # the published model a twin mirrors, or the demo's own name
    arch: ArchSpec
    train: TrainSpec


VOCAB = 4096
PRESETS = {
    "demo": Preset("demo", "wisp-demo-moe", ArchSpec(
        "qwen3_moe", VOCAB, hidden_size=256, num_layers=8, num_heads=8, num_kv_heads=4, head_dim=32,
        num_experts=16, top_k=4, moe_intermediate_size=128, norm_topk_prob=True),
        TrainSpec(time_budget_s=330.0)),
    "qwen3-twin": Preset("qwen3-twin", "Qwen3-30B-A3B", ArchSpec(
        "qwen3_moe", VOCAB, hidden_size=128, num_layers=48, num_heads=4, num_kv_heads=2, head_dim=32,
        num_experts=128, top_k=8, moe_intermediate_size=32, norm_topk_prob=True),
        TrainSpec(batch_size=32, lr=1.5e-3, time_budget_s=220.0, is_checkpointed=True)),
    "olmoe-twin": Preset("olmoe-twin", "OLMoE-1B-7B", ArchSpec(
        "olmoe", VOCAB, hidden_size=128, num_layers=16, num_heads=4, num_kv_heads=4, head_dim=32,
        num_experts=64, top_k=8, moe_intermediate_size=64, norm_topk_prob=False, rms_norm_eps=1e-5),
        TrainSpec(batch_size=32, time_budget_s=270.0)),
    "mixtral-twin": Preset("mixtral-twin", "Mixtral-8x7B", ArchSpec(
        "mixtral", VOCAB, hidden_size=128, num_layers=32, num_heads=4, num_kv_heads=2, head_dim=32,
        num_experts=8, top_k=2, moe_intermediate_size=256, norm_topk_prob=True, rms_norm_eps=1e-5,
        rope_theta=1e6), TrainSpec(batch_size=32, time_budget_s=270.0)),
    "toy": Preset("toy", "toy", ArchSpec(
        "qwen3_moe", VOCAB, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8,
        num_experts=8, top_k=2, moe_intermediate_size=16, norm_topk_prob=True),
        TrainSpec(seq_len=32, batch_size=4, max_steps=4, time_budget_s=60.0, warmup_steps=1,
                  eval_every=2, eval_batches=1)),
}

# Draft (MTP) layers trained on a frozen model (training.train_mtp): the demo's for a 2-core CPU in 18 minutes.
MTP_PRESETS = {
    "demo": TrainSpec(seq_len=256, batch_size=16, max_steps=100000, time_budget_s=1080.0, lr=1e-3, warmup_steps=20,
                      weight_decay=0.0, aux_loss_coef=0.0, eval_every=100, eval_batches=4),
    "toy": TrainSpec(seq_len=32, batch_size=4, max_steps=4, time_budget_s=60.0, warmup_steps=1, eval_every=2,
                     eval_batches=1),
}
