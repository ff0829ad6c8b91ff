"""The latent MoE block (nemotron_h): the router reads the layer's input, the routed experts compute in a smaller
latent space (fc1_latent_proj into it, fc2_latent_proj back), and a non-gated ReLU² shared expert reads the input
as it is. Without a latent size the projections are identities. Its experts are non-gated ReLU² MLPs
(engine.experts.formats.activation.ReluSquared).

Shapes: T tokens, D hidden size, L latent size, K experts per token."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.model.args import ModelArgs
from engine.model.transformer import MoeBlock, MoeContext


class Relu2MLP(nn.Module):
    """down(relu(up(x))²): nemotron_h's dense MLP layers and its shared expert."""

    def __init__(self, hidden: int, intermediate: int, bias: bool = False):
        super().__init__()
        self.up_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.down_proj = nn.Linear(intermediate, hidden, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(torch.square(F.relu(self.up_proj(x))))


class LatentMoeBlock(MoeBlock):
    def __init__(self, args: ModelArgs, layer: int, shared_intermediate: int):
        super().__init__(args, layer)
        self.shared = Relu2MLP(args.hidden_size, shared_intermediate) if shared_intermediate else None
        latent = args.experts.latent_size
        self.fc1_latent_proj = nn.Linear(args.hidden_size, latent, bias=False) if latent else nn.Identity()
        self.fc2_latent_proj = nn.Linear(latent, args.hidden_size, bias=False) if latent else nn.Identity()

    def experts(self, x, ids, weights, shared, context: MoeContext) -> torch.Tensor:
        """x [T, D] -> the routed experts in the latent space [T, L], back to [T, D], plus the shared expert."""
        if context.observer is not None:
            context.observer(self.layer, ids)
        out = self.fc2_latent_proj(context.experts.forward(self.layer, self.fc1_latent_proj(x), ids, weights))
        return out if shared is None else out + shared
