"""The Mamba-2 token mixer (nemotron_h's "M" layers): in_proj splits into the gate z, the conv's input x | B | C and
the time step dt; a depthwise causal conv with SiLU; the selective scan (engine.model.mamba2_scan) with the D skip;
a grouped RMSNorm gated by silu(z); out_proj. Its states per sequence: the conv's last K-1 inputs [K-1, C] and the SSM
state [H, P, N] (fp32). The gated norm runs in fp32 in prefill and decode alike, so a row's bits do not depend on the
step it shares (transformers' prefill path does so; its decode path rounds the recurrent step's output to the
model's dtype and norms in it), and its output is cast once before out_proj.

Shapes: T tokens, D hidden size, I = H * P inner size, C = I + 2 * G * N conv channels, B sequences."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.model.args import ModelArgs
from engine.model.gated_deltanet import causal_conv
from engine.model.mamba2_scan import chunk_scan, state_step
from engine.model.state_mixer import StateMixer


class GroupedGatedRMSNorm(nn.Module):
    """(y * silu(z)) normed over each of G groups of channels, in fp32, then cast and scaled by the weight."""

    def __init__(self, size: int, num_groups: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.num_groups, self.eps = num_groups, eps

    def forward(self, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        h = y.float() * F.silu(z.float())  # [T, I]
        groups = h.view(*h.shape[:-1], self.num_groups, -1)
        groups = groups * torch.rsqrt(groups.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * groups.view(h.shape).to(y.dtype)


class Mamba2Mixer(StateMixer):
    """Parameter names as the checkpoints' mixer.*: in_proj, conv1d, dt_bias, A_log, D, norm, out_proj."""

    def __init__(self, args: ModelArgs, state_layer: int):
        super().__init__()
        spec, hidden = args.mamba, args.hidden_size
        self.spec, self.state_layer, self.out_tail = spec, state_layer, (spec.num_heads, spec.head_dim)
        self.out_dtype = torch.float32
        self.split = (spec.inner_size, spec.conv_dim, spec.num_heads)
        self.in_proj = nn.Linear(hidden, sum(self.split), bias=spec.proj_bias)
        self.conv1d = nn.Conv1d(spec.conv_dim, spec.conv_dim, spec.conv_kernel_dim, groups=spec.conv_dim,
                                bias=spec.conv_bias)
        self.dt_bias = nn.Parameter(torch.ones(spec.num_heads))
        self.A_log = nn.Parameter(torch.zeros(spec.num_heads))
        self.D = nn.Parameter(torch.ones(spec.num_heads))
        self.norm = GroupedGatedRMSNorm(spec.inner_size, spec.n_groups, args.rms_norm_eps)
        self.out_proj = nn.Linear(spec.inner_size, hidden, bias=spec.proj_bias)

    def mix_inputs(self, x: torch.Tensor):
        """x [T, D] -> ((x | B | C [T, C], dt [T, H]), z [T, I])."""
        z, xbc, dt = self.in_proj(x).split(self.split, dim=-1)
        return (xbc, dt), z

    def scan_inputs(self, conv_out: torch.Tensor):
        """conv_out [..., C] -> x [..., H, P], B, C [..., G, N]."""
        spec, lead = self.spec, conv_out.shape[:-1]
        width = spec.n_groups * spec.state_size
        x, B, C = conv_out.split((spec.inner_size, width, width), dim=-1)
        groups = (*lead, spec.n_groups, spec.state_size)
        return x.reshape(*lead, spec.num_heads, spec.head_dim), B.reshape(groups), C.reshape(groups)

    def prefill(self, inputs, states):
        xbc, dt = inputs
        history, state = states
        conv_out, history = causal_conv(xbc, history, self.conv1d.weight[:, 0], self.conv1d.bias)
        x, B, C = self.scan_inputs(conv_out)
        A = -torch.exp(self.A_log.float())
        y, state = chunk_scan(x, dt, A, B, C, self.D, self.dt_bias, state, self.spec.chunk_size,
                              self.spec.time_step_limit)
        return y, (history, state)

    def step(self, inputs, states):
        xbc, dt = inputs
        history, state = states
        conv_out, history = causal_conv(xbc[:, None], history, self.conv1d.weight[:, 0], self.conv1d.bias)
        x, B, C = self.scan_inputs(conv_out[:, 0])
        y, state = state_step(x, dt, -torch.exp(self.A_log.float()), B, C, self.D, self.dt_bias, state)
        return y, (history, state)

    def output(self, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """y [T, H, P] of the scan (fp32) -> the layer's output [T, D]."""
        return self.out_proj(self.norm(y.float().reshape(z.shape), z).to(z.dtype))
