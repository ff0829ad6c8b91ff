"""Which kernels run the gated delta rule: fla's Triton kernels (engine.model.delta_rule_fla) on CUDA where fla-core
imports (the `hybrid` extra), else the plain torch forms (engine.model.gated_deltanet, every device). Where fla does
not import the torch forms run and the reason is logged once. Every step of a process uses the same kernels, so
outputs stay bitwise identical across expert modes and batch compositions either way."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache
from typing import Callable

from engine.model import gated_deltanet

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeltaRuleKernels:
    name: str
    chunked: Callable  # a prompt's tokens of one sequence (gated_deltanet.chunked's contract)
    recurrent_step: Callable  # one token of each of B sequences (gated_deltanet.recurrent_step's contract)


TORCH = DeltaRuleKernels("torch", gated_deltanet.chunked, gated_deltanet.recurrent_step)


def kernels_for(device_type: str) -> DeltaRuleKernels:
    """The kernels for tensors on `device_type` ("cuda", "cpu", ...)."""
    return _kernels(device_type)


@cache
def _kernels(device_type: str) -> DeltaRuleKernels:
    if device_type != "cuda":
        return TORCH  # fla's kernels are Triton on CUDA; elsewhere the torch forms are the path
    try:
        from engine.model import delta_rule_fla
    except Exception as error:  # noqa: BLE001 - a missing or broken fla (or Triton) install means the torch path
        log.warning("fla does not import (%s: %s); the gated delta rule runs in torch (pip install -e "
                    "'.[hybrid]' installs fla-core)", type(error).__name__, error)
        return TORCH
    return DeltaRuleKernels("fla", delta_rule_fla.chunked, delta_rule_fla.recurrent_step)
