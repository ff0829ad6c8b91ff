"""Parameters that stay fp32 when the model computes in bf16/fp16: those of every module that says so with
`keeps_fp32` (DeepSeek-style routers' gates, the hybrids' norms stored as 1 + weight)."""

from __future__ import annotations

from torch import nn


def fp32_parameter_names(model: nn.Module) -> set[str]:
    return {f"{prefix}.{name}" for prefix, module in model.named_modules() if getattr(module, "keeps_fp32", False)
            for name, _ in module.named_parameters()}
