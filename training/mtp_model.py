"""A multi-token-prediction (draft) layer for a trained MoeLM, in Qwen's `mtp.*` layout (Qwen3-Next, Qwen3.5): from
the model's final hidden state at position t and the embedding of token t+1 it predicts token t+2, through the
model's own embedding and lm_head. The math is engine.model.mtp.DraftLayer's ("mtp" style, plain RMSNorm weights).

Shape legend: B batch, S positions, D hidden, V vocabulary."""

from __future__ import annotations

import copy

import torch
from torch import nn

from engine.model.families import family
from engine.model.layers import RMSNorm
from training.moe_model import DecoderLayer, MoeLM, rope_cos_sin

PREFIX = "mtp."


class MtpLayer(nn.Module):
    def __init__(self, model: MoeLM):
        super().__init__()
        arch, D = model.arch, model.arch.hidden_size
        self.arch = arch
        self.pre_fc_norm_embedding = RMSNorm(D, arch.rms_norm_eps)
        self.pre_fc_norm_hidden = RMSNorm(D, arch.rms_norm_eps)
        self.fc = nn.Linear(2 * D, D, bias=False)
        self.layer = DecoderLayer(arch)
        self.norm = RMSNorm(D, arch.rms_norm_eps)

    def forward(self, embeds: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        """embeds [B, S, D] of tokens t+1, hidden [B, S, D] at t (positions 0..S-1) -> what the head reads [B, S, D]."""
        x = self.fc(torch.cat([self.pre_fc_norm_embedding(embeds), self.pre_fc_norm_hidden(hidden)], dim=-1))
        cos, sin = rope_cos_sin(self.arch, x.shape[1], x.device)
        x, _ = self.layer(x, cos, sin)
        return self.norm(x)


def init_from_model(mtp: MtpLayer, model: MoeLM, seed: int, std: float = 0.02) -> None:
    """The decoder layer starts as a copy of the model's last layer and the final norm as the model's; fc starts as
    the identity on the hidden half (plus small noise on the embedding half), so the untrained layer is the model's
    last layer applied once more to its own output."""
    D = model.arch.hidden_size
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        mtp.layer.load_state_dict(copy.deepcopy(model.layers[-1].state_dict()))
        mtp.norm.weight.copy_(model.norm.weight)
        mtp.pre_fc_norm_embedding.weight.fill_(1.0)
        mtp.pre_fc_norm_hidden.weight.fill_(1.0)
        embed_half = torch.randn(D, D, generator=generator) * std
        mtp.fc.weight.copy_(torch.cat([embed_half, torch.eye(D)], dim=1))


def mtp_state_dict(mtp: MtpLayer, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The layer under the checkpoint names engine.model.mtp_names.MTP reads (per-expert keys, as export writes)."""
    names = family(mtp.arch.model_type).weight_names
    expert_names = {"gate_proj": names.gate, "up_proj": names.up, "down_proj": names.down}
    tensors = {}
    for name, tensor in mtp.state_dict().items():
        tensor = tensor.detach().to("cpu", dtype)
        if not name.startswith("layer."):
            tensors[PREFIX + name] = tensor.contiguous()
            continue
        inner = name[len("layer."):]
        if not inner.startswith("mlp."):
            tensors[f"{PREFIX}layers.0.{inner}"] = tensor.contiguous()
        elif inner == "mlp.gate.weight":
            tensors[f"{PREFIX}layers.0.{names.block}.{names.router}.weight"] = tensor
        else:
            for expert, weight in enumerate(tensor):
                tensors[f"{PREFIX}layers.0.{names.block}.experts.{expert}.{expert_names[inner[4:]]}.weight"] = \
                    weight.contiguous()
    return tensors


def draft_logits(mtp: MtpLayer, model: MoeLM, rows: torch.Tensor) -> torch.Tensor:
    """rows [B, S+1] -> the draft's logits [B, S-1, V] at positions 0..S-2, each predicting rows[:, t+2]."""
    with torch.no_grad():
        hidden, _ = model.final_hidden(rows[:, :-2])  # [B, S-1, D]
        embeds = model.embed_tokens(rows[:, 1:-1])  # [B, S-1, D]
    return model.lm_head(mtp(embeds, hidden))
