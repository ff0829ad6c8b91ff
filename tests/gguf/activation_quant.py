"""A test-only reference of llama.cpp's CPU arithmetic: before every matmul with a quantized weight, llama.cpp quantizes
the activations to the weight type's `vec_dot_type` (Q8_0 blocks of 32 with an fp16 scale for Q8_0 and the 32-element
types' weights, Q8_K blocks of 256 with an fp32 scale for k-quants; f16 for F16 weights) and multiplies the integer
blocks. `llama_cpp_activations(model, gguf_types)` makes Wisp's model do the same rounding, so the remaining
difference to llama.cpp's logits is only float summation order. Wisp's product path never does this."""

from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.nn.functional as F

from engine.gguf.param_names import gguf_name
from engine.quant.expert_format import QuantExpertFormat
from engine.quant.quant_modules import QuantLinear

# Q4_1 and Q5_1 weights multiply Q8_1 blocks: Q8_0's values, plus each block's sum (fp16) for the weights' m term,
# which is left out here
VEC_DOT_TYPE = {"Q8_0": "Q8_0", "Q4_0": "Q8_0", "Q5_0": "Q8_0", "Q4_1": "Q8_0", "Q5_1": "Q8_0", "Q4_K": "Q8_K",
                "Q5_K": "Q8_K", "Q6_K": "Q8_K", "Q3_K": "Q8_K", "Q2_K": "Q8_K", "IQ4_NL": "Q8_0", "IQ4_XS": "Q8_K",
                "F16": "F16"}


def quantize_q8_0(x: torch.Tensor) -> torch.Tensor:
    """ggml's quantize_row_q8_0 then dequantized: per 32 values d = absmax / 127 stored as fp16, q = round(x / d)
    (half away from zero)."""
    blocks = x.float().reshape(-1, 32)
    d = blocks.abs().amax(-1, keepdim=True) / 127
    inverse = torch.where(d > 0, 1 / d, torch.zeros_like(d))
    q = _round_away(blocks * inverse)
    return (q * d.half().float()).reshape(x.shape).to(x.dtype)


def quantize_q8_k(x: torch.Tensor) -> torch.Tensor:
    """ggml's quantize_row_q8_K_ref then dequantized: per 256 values the value of largest magnitude m maps to
    -127 (iscale = -127 / m, fp32), q = min(127, nearest_int(iscale * x)), d = 1 / iscale."""
    blocks = x.float().reshape(-1, 256)
    signed_max = blocks.gather(-1, blocks.abs().argmax(-1, keepdim=True))
    iscale = torch.where(signed_max != 0, -127 / signed_max, torch.zeros_like(signed_max))
    q = torch.clamp(torch.round(iscale * blocks), max=127)  # nearest_int rounds half to even
    d = torch.where(iscale != 0, 1 / iscale, torch.zeros_like(iscale))
    return (q * d).reshape(x.shape).to(x.dtype)


def _round_away(v: torch.Tensor) -> torch.Tensor:
    return torch.sign(v) * torch.floor(v.abs() + 0.5)


def quantize_activations(x: torch.Tensor, weight_type: str) -> torch.Tensor:
    """x as llama.cpp's CPU kernels see it when multiplying a weight of weight_type."""
    kind = VEC_DOT_TYPE.get(weight_type)
    if kind == "Q8_0":
        return quantize_q8_0(x)
    if kind == "Q8_K":
        return quantize_q8_k(x)
    if kind == "F16":
        return x.half().to(x.dtype)
    return x


@contextmanager
def llama_cpp_activations(model, gguf_types: dict[str, str]):
    """Within the block, Wisp's MoeTransformer `model` quantizes each quantized matmul's input as llama.cpp does:
    the dense projections (forward pre-hooks), lm_head (model.logits) and the routed experts' per-expert path
    (QuantExpertFormat.run_expert). Yields a counter of expert calls, so a test can check the path was taken."""
    hooks, arch = [], model.args.extra.get("gguf_architecture", "")
    for name, module in model.named_modules():
        if isinstance(module, (torch.nn.Linear, QuantLinear)) and name != "lm_head":
            # a QuantLinear holds the file's type (a merged q/k/v layer has no tensor of its own name)
            weight_type = (module.spec.qtype.name if isinstance(module, QuantLinear)
                           else gguf_types[gguf_name(f"{name}.weight", arch)])
            hooks.append(module.register_forward_pre_hook(
                lambda _m, args, t=weight_type: (quantize_activations(args[0], t),)))
    head = gguf_name("lm_head.weight")
    head_type = gguf_types[head if head in gguf_types else "token_embd.weight"]  # tied: the embedding's type
    logits = model.logits
    model.logits = lambda hidden: logits(quantize_activations(hidden, head_type))
    original, calls = QuantExpertFormat.run_expert, [0]

    def run_expert(self, block, dispatch, u, out):
        calls[0] += 1
        gate_up, down = self.weights(block, out.dtype)
        span = dispatch.span(u)
        rows = out[span]
        gate, up = F.linear(quantize_activations(rows, self.gate.qtype.name), gate_up).chunk(2, dim=-1)
        y = F.linear(quantize_activations(F.silu(gate) * up, self.down.qtype.name), down)
        rows.copy_(y * dispatch.weights[span, None])

    QuantExpertFormat.run_expert = run_expert
    try:
        yield calls
    finally:
        QuantExpertFormat.run_expert = original
        del model.logits
        for hook in hooks:
            hook.remove()
